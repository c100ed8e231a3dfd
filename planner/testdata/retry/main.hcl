# Retry: a sandbox default, a node replacing one attribute, a node turning retry off, a node with the default.
sandbox {
  memory = "4g"
  images = {
    claude-code = "ghcr.io/kewplan/kew-agent:1.4@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4"
  }
  retry {
    attempts = 3
    backoff  = "10s"
    on       = ["timeout", "api_error"]
  }
}

node "implement" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Implement the flag."
}

node "fix" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Fix the flaky test."
  retry {
    attempts = 2
  }
}

node "once" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Tag the release."
  retry {
    attempts = 1
    on       = []
  }
}
