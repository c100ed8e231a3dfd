# model-not-routed: the node routes no model at all, so nothing says which model its agent runs.
sandbox {
  memory = "4g"
  images = { claude-code = "kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4" }
}

node "fix" { # ERROR: model-not-routed
  runner = "claude-code"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Fix the failing test."
}
