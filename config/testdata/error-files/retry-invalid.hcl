sandbox {
  retry {
    attempts = 0 # ERROR: Invalid retry attempts
    backoff  = "-5s" # ERROR: Invalid retry backoff
    on       = ["api_eror", "timeout", "timeout"] # ERROR: Unknown retry class # ERROR: Duplicate retry class
    jitter   = true # ERROR: Unsupported argument
  }
  retry { # ERROR: Duplicate retry block
  }
}

node "fix" {
  runner = "claude-code"
  model  = "m"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Fix it."
  retry {
    attempts = 50 # ERROR: Too many retry attempts
    backoff  = "soon" # ERROR: Invalid retry backoff
    on       = "api_error" # ERROR: Wrong value type
  }
}

node "slow" {
  runner = "claude-code"
  model  = "m"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Fix it."
  retry {
    attempts = var.n # ERROR: Reference not allowed here
    backoff  = "1h" # WARNING: Retry backoff above the cap
    on       = []
  }
}
