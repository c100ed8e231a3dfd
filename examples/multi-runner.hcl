# One task fanned out to four agents, each on its own runner and image, then one reviewer comparing them.
#
#   kewplan plan examples/multi-runner.hcl
#   kewplan runners examples/multi-runner.hcl
#
# Each runner receives only its own credentials, by name; `kewplan plan` lists which credential reaches which
# node.

locals {
  repo   = "https://github.com/acme/widgets.git"
  prompt = file("prompts/fix.md")
}

sandbox {
  memory = "4g"
  cpus   = 2
  images = {
    "claude-code" = "ghcr.io/kewplan/kew-agent@sha256:5a1b6c9a0d3e4f7081926354a7b8c9d0e1f2a3b4c5d6e7f8091a2b3c4d5e6f70"
    opencode      = "ghcr.io/kewplan/kew-opencode@sha256:0f1e2d3c4b5a69788796a5b4c3d2e1f00112233445566778899aabbccddeeff0"
    pi            = "ghcr.io/kewplan/kew-pi@sha256:9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d9c8b7a6f5e4d3c2b1a0f9e8d"
    hermes        = "ghcr.io/kewplan/kew-hermes@sha256:1234567890abcdef1234567890abcdef1234567890abcdef1234567890abcdef"
  }
}

node "claude" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = local.repo
  branch = "kew/fix-claude"
  prompt = local.prompt
}

node "opencode" {
  runner = "opencode"
  model  = "openrouter/anthropic/claude-sonnet-4.5"
  repo   = local.repo
  branch = "kew/fix-opencode"
  prompt = local.prompt
  # Its agent reads its API base URL from no environment variable, so its container holds the key.
  credentials = "forward"
}

node "pi" {
  runner = "pi"
  model  = "openai/gpt-5"
  repo   = local.repo
  branch = "kew/fix-pi"
  prompt = local.prompt
  # Its agent reads its API base URL from no environment variable, so its container holds the key.
  credentials = "forward"
}

node "hermes" {
  runner  = "hermes"
  model   = "nousresearch/hermes-4-405b"
  repo    = local.repo
  branch  = "kew/fix-hermes"
  prompt  = local.prompt
  timeout = "30m"
}

node "compare" {
  runner = "claude-code"
  role   = "reviewer"
  model  = "claude-opus-4-1"
  repo   = local.repo
  prompt = templatefile("prompts/compare.md.tftpl", {
    branches = [node.claude.branch, node.opencode.branch, node.pi.branch, node.hermes.branch]
  })
}
