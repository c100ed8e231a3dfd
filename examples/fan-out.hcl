# Fan-out: the same task across many repositories, then one reviewer per fix, with Terraform's for_each and count.
#
#   kewplan plan examples/fan-out.hcl
#   kewplan plan examples/fan-out.hcl --target 'fix["web"]'     # that instance alone
#   kewplan plan examples/fan-out.hcl --var 'services=["api","web","billing","search"]'
#
# fix["api"], review["api"] and shard[2] are addresses: the plan, the graph, --target, the ledger and diff name
# instances by them. review["api"] waits for fix["api"] only (it reads each.value), so a failed fix["api"] skips
# review["api"] and nothing else; report refers to node.review as a whole and waits for every instance.

variable "services" {
  type        = set(string)
  default     = ["api", "web", "billing"]
  description = "The services whose lint warnings are fixed, one repository each"
}

sandbox {
  memory = "4g"
  images = {
    "claude-code" = "ghcr.io/kewplan/kew-agent@sha256:5a1b6c9a0d3e4f7081926354a7b8c9d0e1f2a3b4c5d6e7f8091a2b3c4d5e6f70"
  }
}

node "fix" {
  for_each = var.services # a set of strings or a map (any value type)
  runner   = "claude-code"
  model    = "claude-sonnet-4-5"
  repo     = "https://github.com/acme/${each.key}.git"
  branch   = "kew/lint-${each.key}"
  prompt   = templatefile("prompts/lint.md.tftpl", { service = each.key })
}

node "review" {
  for_each = node.fix # one reviewer per fix instance, same keys
  runner   = "claude-code"
  role     = "reviewer"
  model    = "claude-sonnet-4-5"
  repo     = each.value.repo
  ref      = each.value.commit # known after apply, per instance
  prompt   = "Review the lint fix on ${each.value.branch}: behaviour must not change."
}

node "shard" {
  count  = 4 # count.index 0..3
  runner = "claude-code"
  model  = "claude-haiku-4-5"
  repo   = "https://github.com/acme/monorepo.git"
  prompt = "Take shard ${count.index} of 4 of the flaky-test list in docs/flaky.md and fix those tests."
}

node "report" {
  runner     = "claude-code"
  model      = "claude-haiku-4-5"
  repo       = "https://github.com/acme/reports.git"
  depends_on = [node.review, node.shard] # waits for every instance
  prompt     = join("\n", concat(["Summarise the lint campaign:"], [for k, r in node.review : "${k}: ${r.verdict}"], node.shard[*].commit))
}
