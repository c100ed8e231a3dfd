# unmapped-runner: the legacy single image serves claude-code only, so an opencode node has no image.
sandbox {
  memory = "4g"
  image  = "kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4"
}

node "docs" {
  runner = "opencode" # ERROR: unmapped-runner
  model  = "moonshotai/kimi-k2"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Update the README."
}
