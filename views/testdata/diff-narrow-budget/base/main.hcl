# The base: no apply-wide cap, a high node cost cap, no token cap, a long timeout.
sandbox {
  memory = "4g"
  images = {
    claude-code = "ghcr.io/acme/kew-agent@sha256:5a1b6c9a0d3e4f7081926354a7b8c9d0e1f2a3b4c5d6e7f8091a2b3c4d5e6f70"
  }
  budget {
    max_usd   = 2
    max_turns = 200
  }
}

node "fix" {
  runner  = "claude-code"
  model   = "claude-sonnet-4-5"
  repo    = "https://github.com/acme/widgets.git"
  prompt  = "Fix the flaky test in parser_test.go."
  timeout = "2h"
  budget {
    max_usd = 5
    warn_at = 0.9
  }
}
