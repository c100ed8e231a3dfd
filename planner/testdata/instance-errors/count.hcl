sandbox {
  memory = "4g"
  images = {
    claude-code = "kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4"
  }
}

node "negative" {
  count  = -1 # ERROR: Invalid count argument
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/api.git"
  prompt = "Fix it."
}

node "fraction" {
  count  = 1.5 # ERROR: Invalid count argument
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/api.git"
  prompt = "Fix it."
}

node "text" {
  count  = "many" # ERROR: Invalid count argument
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/api.git"
  prompt = "Fix it."
}
