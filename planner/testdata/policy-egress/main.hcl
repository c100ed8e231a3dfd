# allowed_egress bounds every node's reach: a host beyond it refuses the node, where the host is written.
policy {
  allowed_egress = ["api.anthropic.com", "*.github.com", "github.com"]
}

sandbox {
  memory = "4g"
  images = {
    claude-code = "ghcr.io/acme/kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4"
    opencode    = "ghcr.io/acme/kew-opencode@sha256:1c8e6d9f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5"
  }
  egress {
    allow = ["github.com", "api.github.com"]
  }
}

node "fix" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Fix the flaky test."
  egress {
    allow = ["pypi.org"]
  }
}

node "docs" {
  runner = "opencode"
  model  = "moonshotai/kimi-k2"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Update the README."
}

node "review" {
  runner = "claude-code"
  role   = "reviewer"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Review the change."
}
