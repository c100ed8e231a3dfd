# The head: fix's pull request goes into release/2.0, lint writes to another repository, the reviewer became a
# worker, and a new worker pushes straight to prod/eu-1, which it is allowed to.
sandbox {
  memory             = "4g"
  protected_branches = ["prod/*"]
  images = {
    claude-code = "ghcr.io/acme/kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4"
    opencode    = "ghcr.io/acme/kew-opencode@sha256:1c8e6d9f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5"
  }
}

node "fix" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Fix the flaky test in parser_test.go."
  pull_request {
    base  = "release/2.0"
    title = "Fix the flaky parser test"
  }
}

node "lint" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/gadgets.git"
  prompt = "Fix the lint warnings."
}

node "review" {
  runner     = "opencode"
  model      = "openrouter/anthropic/claude-sonnet-4.5"
  repo       = "https://github.com/acme/widgets.git"
  prompt     = "Review the fix."
  depends_on = [node.fix]
}

node "hotfix" {
  runner               = "claude-code"
  model                = "claude-sonnet-4-5"
  repo                 = "https://github.com/acme/widgets.git"
  branch               = "prod/eu-1"
  allow_protected_push = true
  prompt               = "Patch the outage."
}
