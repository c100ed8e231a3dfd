sandbox {
  memory = "4g"
  images = {
    claude-code = "kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4"
  }
}

node "fix" {
  for_each = toset(["api"])
  runner   = "claude-code"
  model    = "claude-sonnet-4-5"
  repo     = "https://github.com/acme/api.git"
  prompt   = "Fix it."
}

node "fix-api" { # ERROR: Instance names collide
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/api.git"
  prompt = "Fix it."
}
