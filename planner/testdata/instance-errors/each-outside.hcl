sandbox {
  memory = "4g"
  images = {
    claude-code = "kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4"
  }
}

locals {
  name = each.key # ERROR: Reference to "each" in context without for_each
}

node "plain" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/api.git"
  prompt = "Fix ${each.key}." # ERROR: Reference to "each" in context without for_each
}

node "keyed" {
  for_each = toset(["api"])
  runner   = "claude-code"
  model    = "claude-sonnet-4-5"
  repo     = "https://github.com/acme/api.git"
  prompt   = "Shard ${count.index} of ${each.name}." # ERROR: Reference to "count" in non-counted context # ERROR: Invalid "each" attribute
  branch   = each.name # ERROR: Invalid "each" attribute
}

node "counted" {
  count    = 2
  runner   = "claude-code"
  model    = "claude-sonnet-4-5"
  repo     = "https://github.com/acme/api.git"
  prompt   = "Shard ${count.number}." # ERROR: Invalid "count" attribute
}

node "self" {
  for_each = toset([each.key]) # ERROR: Reference to "each" in context without for_each
  runner   = "claude-code"
  model    = "claude-sonnet-4-5"
  repo     = "https://github.com/acme/api.git"
  prompt   = "Fix it."
}
