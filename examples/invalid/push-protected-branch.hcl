# push-protected-branch: a worker's commits go to a branch of their own and reach main through a pull request.
sandbox {
  memory             = "4g"
  protected_branches = ["prod/*"]
  images             = { claude-code = "kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4" }
}

node "fix" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  branch = "main" # ERROR: push-protected-branch
  prompt = "Fix the failing test."
}

node "hotfix" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  branch = "prod/eu-1" # ERROR: push-protected-branch
  prompt = "Patch the outage."
}

node "feature" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  ref    = "feature/search"
  branch = "feature/search" # ERROR: push-protected-branch
  prompt = "Finish the search feature."
}
