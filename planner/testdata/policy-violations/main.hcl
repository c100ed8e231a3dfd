# Every policy rule broken once, with the configuration's own policy block.
policy {
  require_pinned_images  = true
  allowed_networks       = ["allowlist"]
  allowed_image_prefixes = ["ghcr.io/acme/"]
  credentials = {
    ANTHROPIC_API_KEY  = ["claude-code"]
    OPENROUTER_API_KEY = ["opencode"]
  }
  max_pids_limit = 1024
}

sandbox {
  network    = "open"
  pids_limit = 4096
  memory     = "4g"
  images = {
    claude-code = "ghcr.io/acme/kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4"
    opencode    = "docker.io/someone/opencode:latest"
    pi          = "ghcr.io/acme/kew-pi@sha256:1c8e6d9f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5"
  }
}

# An override that hands the Anthropic key to opencode as well.
runner "opencode" {
  credentials = ["OPENROUTER_API_KEY", "ANTHROPIC_API_KEY"]
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

node "bench" {
  runner = "pi"
  model  = "openrouter/qwen/qwen3-coder"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Speed up the parser."
}
