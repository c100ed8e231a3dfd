# The head: the same configuration with its blocks, credentials and dependencies in another order, and
# attributes re-aligned. The diff must be empty.

node "review" {
  depends_on = [node.docs, node.fix]
  runner     = "claude-code"
  role       = "reviewer"
  model      = "claude-sonnet-4-5"
  repo       = "https://github.com/acme/widgets.git"
  prompt     = "Review the fix and the docs."
}

node "docs" {
  runner = "opencode"
  model  = "moonshotai/kimi-k2"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Update the README."
}

runner "opencode" {
  credentials = ["OPENCODE_EXTRA_KEY", "OPENROUTER_API_KEY"]
}

node "fix" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Fix the flaky test in parser_test.go."
}

sandbox {
  images = {
    opencode    = "ghcr.io/acme/kew-opencode@sha256:1c8e6d9f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5"
    claude-code = "ghcr.io/acme/kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4"
  }
  memory = "4g"
}
