# The policy's provider_fetch bounds what any node may opt in to; a forwarded node has every feature.
sandbox {
  memory = "4g"
  images = {
    claude-code = "ghcr.io/acme/kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4"
    opencode    = "ghcr.io/acme/kew-opencode@sha256:1c8e6d9f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5"
  }
  egress {
    provider_fetch = ["web_search"]
  }
}

node "fix" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Fix the flaky test."
  egress {
    provider_fetch = ["mcp_servers", "url_sources"]
  }
}

node "review" {
  runner = "claude-code"
  role   = "reviewer"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Review the change."
}

node "docs" {
  runner      = "opencode"
  credentials = "forward"
  model       = "moonshotai/kimi-k2"
  repo        = "https://github.com/acme/widgets.git"
  prompt      = "Update the README."
}
