# unknown-runner: a node names a runner that is neither built in nor declared.
sandbox {
  memory = "4g"
  images = { claude-code = "kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4" }
}

node "fix" {
  runner = "claude-cod" # ERROR: unknown-runner
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Fix the failing test."
}
