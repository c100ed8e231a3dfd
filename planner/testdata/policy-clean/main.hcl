# A configuration that meets its policy: no diagnostics, every argv rendered.
policy {
  require_pinned_images  = true
  allowed_networks       = ["allowlist"]
  allowed_image_prefixes = ["ghcr.io/acme/"]
  credentials = {
    ANTHROPIC_API_KEY       = ["claude-code"]
    CLAUDE_CODE_OAUTH_TOKEN = ["claude-code"]
    OPENROUTER_API_KEY      = ["opencode", "pi"]
  }
  max_pids_limit = 1024
}

sandbox {
  memory = "4g"
  images = {
    claude-code = "ghcr.io/acme/kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4"
    opencode    = "ghcr.io/acme/kew-opencode@sha256:1c8e6d9f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5"
  }
}

node "fix" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Fix the flaky test."
}

node "docs" {
  runner = "opencode"
  model  = "moonshotai/kimi-k2"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Update the README."
}
