# credential-by-value: a credential is forwarded by name only; a value in configuration would reach argv and logs.
sandbox {
  memory = "4g"
  images = { claude-code = "kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4" }
}

runner "claude-code" {
  credentials = ["ANTHROPIC_API_KEY=sk-ant-not-a-real-key"] # ERROR: credential-by-value
}

node "fix" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Fix the failing test."
}
