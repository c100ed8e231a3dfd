# host-owned-arg: a session to resume, and a path outside /work, mean nothing inside the container.
sandbox {
  memory = "4g"
  images = { claude-code = "kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4" }
}

runner "claude-code" {
  args = [
    "--dangerously-skip-permissions", "--verbose", "--output-format", "stream-json", "--model", model,
    "--resume",                                  # ERROR: host-owned-arg
    "--mcp-config", "/home/me/.claude/mcp.json", # ERROR: host-owned-arg
  ]
}

node "fix" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Fix the failing test."
}
