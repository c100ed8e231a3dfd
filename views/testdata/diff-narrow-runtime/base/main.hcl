# The base: the fixer on runc, the reviewer on crun.
sandbox {
  runtime = "runsc"
  memory  = "4g"
  images = {
    claude-code = "ghcr.io/acme/kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4"
    opencode    = "ghcr.io/acme/kew-opencode@sha256:1c8e6d9f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5"
  }
}

node "fix" {
  runner  = "claude-code"
  model   = "claude-sonnet-4-5"
  repo    = "https://github.com/acme/widgets.git"
  prompt  = "Fix the flaky test in parser_test.go."
  runtime = "runc"
}

node "review" {
  runner     = "opencode"
  role       = "reviewer"
  model      = "openrouter/anthropic/claude-sonnet-4.5"
  repo       = "https://github.com/acme/widgets.git"
  prompt     = "Review the fix."
  runtime    = "crun"
  depends_on = [node.fix]
}
