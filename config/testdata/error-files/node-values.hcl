node "fix" {
  runner  = "claude-code"
  role    = "boss" # ERROR: Invalid role
  repo    = "ext::sh -c touch% /tmp/pwned" # ERROR: Invalid repo
  ref     = "--upload-pack=evil" # ERROR: Invalid ref
  branch  = "kew/fix..x" # ERROR: Invalid branch
  prompt  = "Fix it."
  timeout = "-5m" # ERROR: Invalid timeout
}

node "review" {
  runner  = "" # ERROR: Invalid runner
  repo    = "-oProxyCommand=evil" # ERROR: Invalid repo
  prompt  = "Review it."
  timeout = "soon" # ERROR: Invalid timeout

  pull_request {
    base  = "main branch" # ERROR: Invalid pull_request.base
    title = "Fix"
  }
}
