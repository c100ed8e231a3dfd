# The legacy single image serves claude-code only.
sandbox {
  image  = "kew-agent:1.4"
  memory = "2g"
}

node "fix" {
  runner = "claude-code"
  model  = "claude-opus-4-1"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Fix the flaky test in widgets_test.go."
}
