node "fix" {
  runner = "claude-code"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Fix it." {{ # ERROR: Missing newline after argument
}
