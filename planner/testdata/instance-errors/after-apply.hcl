sandbox {
  memory = "4g"
  images = {
    claude-code = "kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4"
  }
}

node "scan" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/api.git"
  prompt = "List the services."
}

node "fix" {
  for_each = toset([node.scan.commit]) # ERROR: Invalid for_each argument
  runner   = "claude-code"
  model    = "claude-sonnet-4-5"
  repo     = "https://github.com/acme/api.git"
  prompt   = "Fix ${each.key}."
}

node "retry" {
  count  = node.scan.status == "failed" ? 1 : 0 # ERROR: Invalid count argument
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/api.git"
  prompt = "Try again."
}
