# The policy requires gVisor; the sandbox asks for it, one node opts out and one node is on the engine's default.
policy {
  required_runtime = "runsc"
}

sandbox {
  runtime = "runsc"
  images = {
    claude-code = "ghcr.io/acme/kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4"
  }
  memory = "4g"
}

node "untrusted" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Fix the flaky test."
}

node "optout" {
  runner  = "claude-code"
  model   = "claude-sonnet-4-5"
  repo    = "https://github.com/acme/widgets.git"
  prompt  = "Update the changelog."
  runtime = "runc"
}

node "crun" {
  runner  = "claude-code"
  model   = "claude-sonnet-4-5"
  repo    = "https://github.com/acme/widgets.git"
  prompt  = "Update the docs."
  runtime = "crun"
}
