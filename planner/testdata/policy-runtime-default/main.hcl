# An organisation policy file requires gVisor; the configuration chooses no runtime, so both nodes are on the
# engine's default and one diagnostic at the sandbox block refuses them.
sandbox {
  images = {
    claude-code = "ghcr.io/acme/kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4"
  }
  memory = "4g"
}

node "a" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Fix the flaky test."
}

node "b" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Update the docs."
}
