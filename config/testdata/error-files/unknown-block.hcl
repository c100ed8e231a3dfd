nodes "fix" { # ERROR: Unsupported block type
  runner = "claude-code"
}

sandbx { # ERROR: Unsupported block type
}

node "fix" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Fix it."

  pull_requests { # ERROR: Unsupported block type
    base = "main"
  }
}
