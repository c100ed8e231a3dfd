node "no-runner" { # ERROR: Missing required argument
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Fix it."
}

node "nothing" { # ERROR: Missing required argument # ERROR: Missing required argument # ERROR: Missing required argument
}

# A missing model is left to the planner's model-not-routed rule, so no error here.
node "no-model" {
  runner = "claude-code"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Fix it."
}

variable "v" {
  validation { # ERROR: Missing required argument
    condition = true
  }
}
