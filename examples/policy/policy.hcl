# An organisation's policy as code: rules over the plan (plan) and its change against a base plan (change).
#
#   kewplan plan --policy examples/policy/policy.hcl examples/policy/fixtures/small-fix
#   kewplan policy test examples/policy/tests
#
# deny refuses the plan, warn warns, review makes the plan need the approvals below. See docs/policy.md.
policy {
  rule "opus-fan-out" {
    level     = "deny"
    condition = anytrue([for n in plan.nodes : n.model == "claude-opus-4-1" && n.instances > 10])
    message   = "Opus on a fan-out of more than 10 instances: use Sonnet, or split the run."
  }

  rule "push-outside-kew" {
    level     = "review"
    condition = anytrue([for n in plan.nodes : n.push != null && !startswith(n.push.branch, "kew/")])
    message   = "A worker pushes outside kew/**."
  }

  rule "new-open-credential" {
    level     = "deny"
    condition = change != null && anytrue([for w in change.widenings : w.rule == "widening-credential" && w.network == "open"])
    message   = "A credential was added to an open-network node."
  }

  rule "costly-plan" {
    level     = "review"
    condition = plan.budget == null || plan.budget.worst_case_usd == null || plan.budget.worst_case_usd >= 5
    message   = "The plan's worst case is $5 or more, or unbounded (a node without max_usd)."
  }

  rule "unpinned-image" {
    level     = "warn"
    condition = anytrue([for n in plan.nodes : length(regexall("@sha256:[0-9a-f]{64}$", n.image)) == 0])
    message   = "An image is not pinned by digest."
  }

  # A plan that no review rule matched and that widens nothing against apply --base needs no approval: the
  # small, safe change applies on merge.
  approvals {
    required        = 1
    allowed_signers = "allowed_signers"
    when            = "review"
  }
}
