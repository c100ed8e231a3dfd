node "fix" {
  runner = "claude-code"
  model  = env("MODEL") # ERROR: Call to unknown function
  repo   = env.REPO # ERROR: Unknown reference
  prompt = "Fix it."
}
