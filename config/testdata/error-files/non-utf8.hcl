node "fix" {
  runner = "claude-code"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Café" # ERROR: Invalid UTF-8 encoding
}
