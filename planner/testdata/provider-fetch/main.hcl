# provider_fetch opts a node in to what its provider may fetch on its agent's behalf: the sandbox's list for
# every node whose API has the feature, the node's on top. A forwarded node has every feature.
sandbox {
  memory = "4g"
  images = {
    claude-code = "ghcr.io/acme/kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4"
    hermes      = "ghcr.io/acme/kew-hermes@sha256:2d9f7e0a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6"
    opencode    = "ghcr.io/acme/kew-opencode@sha256:1c8e6d9f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5"
  }
  egress {
    provider_fetch = ["url_sources", "code_execution"]
  }
}

node "fix" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Fix the flaky test."
}

node "research" {
  runner = "hermes"
  model  = "anthropic/claude-sonnet-4.5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Summarise the open issues."
  egress {
    provider_fetch = ["web_search"]
  }
}

node "docs" {
  runner      = "opencode"
  credentials = "forward"
  model       = "moonshotai/kimi-k2"
  repo        = "https://github.com/acme/widgets.git"
  prompt      = "Update the README."
  egress {
    provider_fetch = ["web_search"]
  }
}
