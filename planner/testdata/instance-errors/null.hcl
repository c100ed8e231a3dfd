sandbox {
  memory = "4g"
  images = {
    claude-code = "kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4"
  }
}

variable "services" {
  type    = set(string)
  default = null
}

variable "names" {
  type    = list(string)
  default = ["api", null]
}

node "null_set" {
  for_each = var.services # ERROR: Invalid for_each argument
  runner   = "claude-code"
  model    = "claude-sonnet-4-5"
  repo     = "https://github.com/acme/api.git"
  prompt   = "Fix ${each.key}."
}

node "null_key" {
  for_each = toset(var.names) # ERROR: Invalid for_each argument
  runner   = "claude-code"
  model    = "claude-sonnet-4-5"
  repo     = "https://github.com/acme/api.git"
  prompt   = "Fix ${each.key}."
}
