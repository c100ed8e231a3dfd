# Every warning: open network with credentials, images not pinned, no memory limit.
sandbox {
  network = "open"
  images = {
    claude-code = "kew-agent:latest"
    hermes      = "kew-hermes:0.21"
  }
}

node "a" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Task A."
}

node "b" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Task B."
}

node "c" {
  runner = "hermes"
  model  = "nousresearch/hermes-4-405b"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Task C."
}
