# One node per fail-closed error rule; none of them gets an argv.
sandbox {
  memory = "4g"
  image  = "kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4"
  images = {
    lemonade    = "kew-lemonade@sha256:4f1b9a0c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708"
    leaky       = "kew-pi@sha256:2d9f7eaf3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6"
    resumer     = "kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4"
    fixed-model = "kew-pi@sha256:2d9f7eaf3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6"
  }
}

runner "leaky" {
  protocol    = "pi"
  credentials = ["OPENROUTER_API_KEY=sk-or-v1-not-a-real-key"]
  args        = ["--mode", "json", "--model", model]
}

runner "resumer" {
  protocol    = "claude-code"
  credentials = ["ANTHROPIC_API_KEY"]
  args        = ["--resume", "--verbose", "--model", model, "--settings", "/etc/agent/settings.json"]
}

runner "fixed-model" {
  protocol    = "pi"
  credentials = ["OPENROUTER_API_KEY"]
  args        = ["--mode", "json", "--model", "openai/gpt-4o"]
}

node "typo" {
  runner = "claude-cod"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Task."
}

node "pi-on-legacy" {
  runner = "pi"
  model  = "qwen/qwen3-coder"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Task."
}

node "local" {
  runner = "lemonade"
  model  = "Qwen3-Coder-30B-A3B-Instruct-GGUF"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Task."
}

node "leak" {
  runner = "leaky"
  model  = "qwen/qwen3-coder"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Task."
}

node "resume" {
  runner = "resumer"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Task."
}

node "no-model" {
  runner = "claude-code"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Task."
}

node "pinned" {
  runner = "fixed-model"
  model  = "qwen/qwen3-coder"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Task."
}

node "blank" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "  \n  "
}

node "ping" {
  runner     = "claude-code"
  model      = "claude-sonnet-4-5"
  repo       = "https://github.com/acme/widgets.git"
  prompt     = "Task."
  depends_on = [node.pong]
}

node "pong" {
  runner     = "claude-code"
  model      = "claude-sonnet-4-5"
  repo       = "https://github.com/acme/widgets.git"
  prompt     = "Task."
  depends_on = [node.ping]
}

node "orphan" {
  runner     = "claude-code"
  model      = "claude-sonnet-4-5"
  repo       = "https://github.com/acme/widgets.git"
  prompt     = "Task."
  depends_on = [node.ghost]
}
