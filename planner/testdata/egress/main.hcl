# Egress as code: each node reaches its runner's model endpoint, the sandbox's hosts and its own.
sandbox {
  memory     = "4g"
  tmpfs_size = "256m"
  images = {
    claude-code = "ghcr.io/acme/kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4"
    opencode    = "ghcr.io/acme/kew-opencode@sha256:1c8e6d9f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5"
    lemonade    = "ghcr.io/acme/kew-pi@sha256:2d9f7e0a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6"
  }
  egress {
    allow = ["GitHub.com", "*.pythonhosted.org", "github.com."]
  }
}

# An ANTHROPIC_BASE_URL user: the model API is the corporate gateway, not api.anthropic.com.
runner "opencode" {
  endpoints = ["llm-gateway.corp.example:8443"]
}

runner "lemonade" {
  credentials = ["LEMONADE_API_KEY"]
}

node "fix" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Fix the flaky test."
  egress {
    allow = ["pypi.org", "github.com"]
  }
}

node "docs" {
  runner = "opencode"
  model  = "moonshotai/kimi-k2"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Update the README."
}

node "local" {
  runner = "lemonade"
  model  = "Qwen3.5-35B-A3B-GGUF"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Tidy the changelog."
}
