# The smallest useful configuration: one agent fixes one repository.
#
#   kewplan plan examples/quickstart.hcl
#
# The agent runs in a container with no network but the allowlist network, its credentials forwarded by name
# from your environment (ANTHROPIC_API_KEY for claude-code), and pushes its commits to the branch kew/fix.

sandbox {
  memory = "4g"
  images = {
    "claude-code" = "ghcr.io/kewplan/kew-agent@sha256:5a1b6c9a0d3e4f7081926354a7b8c9d0e1f2a3b4c5d6e7f8091a2b3c4d5e6f70"
  }
}

node "fix" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = file("prompts/fix.md")
}
