budget {
  max_usd = 0 # ERROR: Invalid max_usd
}

budget { # ERROR: Duplicate budget block
  max_usd = 20
}

sandbox {
  budget {
    max_usd    = -1 # ERROR: Invalid max_usd
    max_tokens = 1.5 # ERROR: Invalid number
    max_turns  = 0 # ERROR: Invalid max_turns
    warn_at    = 1 # ERROR: Invalid warn_at
    max_cost   = 3 # ERROR: Unsupported argument
  }
}

node "fix" {
  runner = "claude-code"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Fix it."
  model  = "claude-sonnet-4-5"
  budget {
    max_usd = "lots" # ERROR: Wrong value type
    warn_at = 0 # ERROR: Invalid warn_at
  }
  budget { # ERROR: Duplicate budget block
    max_turns = 3
  }
}

pricing "claude-sonnet-4-5" {
  input  = 3
  output = -15 # ERROR: Invalid price
}

pricing "local-model" {
  input  = 0
  output = 0
}

pricing "local-model" { # ERROR: Duplicate pricing block
  input  = 1
  output = 1
}

pricing "no-output" { # ERROR: Missing required argument
  input = 1
}
