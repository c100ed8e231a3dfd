# Apply re-plans a reviewer once its fix finished: outputs arrive by instance address, so review["api"] knows
# its ref while review["web"] still waits for fix["web"].
sandbox {
  memory = "4g"
  images = {
    claude-code = "kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4"
  }
}

node "fix" {
  for_each = toset(["api", "web"])
  runner   = "claude-code"
  model    = "claude-sonnet-4-5"
  repo     = "https://github.com/acme/${each.key}.git"
  branch   = "kew/lint-${each.key}"
  prompt   = "Fix the lint warnings."
}

node "review" {
  for_each = node.fix
  runner   = "claude-code"
  role     = "reviewer"
  model    = "claude-sonnet-4-5"
  repo     = each.value.repo
  ref      = each.value.commit
  prompt   = "Review ${each.value.branch}."
}

node "pick" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/api.git"
  ref    = node.fix[local.first].commit
  prompt = "Follow up on ${node.review["api"].verdict}."
}

locals {
  first = "api"
}
