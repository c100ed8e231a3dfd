# A for_each over a set of services, a reviewer per fix instance (for_each over another node's instances),
# a count, and a report that waits for every review.
sandbox {
  memory = "4g"
  images = {
    claude-code = "kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4"
  }
}

variable "services" {
  type    = set(string)
  default = ["api", "web", "Billing Service"]
}

node "fix" {
  for_each = var.services
  runner   = "claude-code"
  model    = "claude-sonnet-4-5"
  repo     = "https://github.com/acme/${lower(replace(each.key, " ", "-"))}.git"
  prompt   = "Fix the lint warnings of ${each.key}."
}

node "review" {
  for_each = node.fix
  runner   = "claude-code"
  role     = "reviewer"
  model    = "claude-sonnet-4-5"
  repo     = each.value.repo
  ref      = each.value.commit
  prompt   = "Review the lint fix of ${each.key}."
}

node "shard" {
  count  = 2
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/monorepo.git"
  prompt = "Take shard ${count.index} of 2."
}

node "report" {
  runner     = "claude-code"
  model      = "claude-sonnet-4-5"
  repo       = "https://github.com/acme/reports.git"
  depends_on = [node.review]
  prompt     = join("\n", concat([for k, r in node.review : "${k}: ${r.status}"], node.shard[*].commit, [node.fix["api"].commit]))
}
