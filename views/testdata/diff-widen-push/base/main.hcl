# The base: a worker that pushes to its own branch with a pull request into main, a second worker, and a reviewer.
sandbox {
  memory = "4g"
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
    base  = "main"
    title = "Fix the flaky parser test"
  }
}

node "lint" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Fix the lint warnings."
}

node "review" {
  runner     = "opencode"
  role       = "reviewer"
  model      = "openrouter/anthropic/claude-sonnet-4.5"
  repo       = "https://github.com/acme/widgets.git"
  prompt     = "Review the fix."
  depends_on = [node.fix]
}
