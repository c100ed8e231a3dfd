# budget-unpriced: a cost cap on a model with no known price, on a runner that reports cost only at the end (or
# never), could not be checked while the agent runs; kewplan never takes an unknown price as zero.
sandbox {
  memory = "4g"
  images = {
    claude-code = "kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4"
    hermes      = "kew-hermes@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4"
  }
  budget {
    max_usd = 2 # ERROR: budget-unpriced
  }
}

node "fix" {
  runner = "claude-code"
  model  = "claude-future-9"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Fix the flaky test."
}

node "triage" {
  runner = "hermes"
  model  = "nousresearch/hermes-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Triage the open issues."
  budget {
    max_usd = 1 # ERROR: budget-unpriced
  }
}

# Priced by a pricing block: no error.
node "docs" {
  runner = "claude-code"
  model  = "claude-local-docs"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Update the docs."
}

pricing "claude-local-docs" {
  input  = 1
  output = 5
}
