node "fix" {
  runner = "claude-code"
  repo   = "https://github.com/acme/widgets.git" "extra" # ERROR: Missing newline after argument
  prompt = "Fix it."
}
