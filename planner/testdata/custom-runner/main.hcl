# A custom runner, and an override that widens claude-code's credentials (the origin says where).
sandbox {
  memory = "4g"
  images = {
    claude-code = "kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4"
    aider       = "kew-aider@sha256:3e0a8fb04c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f7"
  }
}

runner "aider" {
  protocol    = "claude-code"
  credentials = ["OPENROUTER_API_KEY"]
  args        = ["--stream-json", "--model", "openrouter/${model}", "--yes-always"]
}

runner "claude-code" {
  credentials = ["ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"]
}

node "refactor" {
  runner = "aider"
  model  = "deepseek/deepseek-chat-v3"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Extract the parser into its own package."
}

node "review" {
  runner     = "claude-code"
  role       = "reviewer"
  model      = "claude-sonnet-4-5"
  repo       = "https://github.com/acme/widgets.git"
  prompt     = "Review kew/refactor."
  depends_on = [node.refactor]
}
