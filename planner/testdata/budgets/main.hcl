# Budgets: an apply-wide cap, a sandbox default, a node that replaces it attribute by attribute, a pricing block
# overriding the built-in table, and a node without a cost cap (so the worst case is unbounded).
budget {
  max_usd = 20
}

sandbox {
  memory = "4g"
  images = {
    claude-code = "ghcr.io/acme/kew-agent@sha256:5a1b6c9a0d3e4f7081926354a7b8c9d0e1f2a3b4c5d6e7f8091a2b3c4d5e6f70"
    opencode    = "ghcr.io/acme/kew-opencode@sha256:1c8e6d9f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5"
    hermes      = "ghcr.io/acme/kew-hermes@sha256:2c8e6d9f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5"
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
  timeout = "45m"
  budget {
    max_usd    = 1.5
    max_tokens = 2000000
    warn_at    = 0.8
  }
}

node "docs" {
  runner = "opencode"
  model  = "anthropic/claude-haiku-4.5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Update the docs."
}

node "triage" {
  runner = "hermes"
  model  = "claude-haiku-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Triage the open issues."
}

pricing "claude-haiku-4-5" {
  input       = 1
  output      = 5
  cache_read  = 0.10
  cache_write = 1.25
}
