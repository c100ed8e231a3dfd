# The small, safe change: nothing matches, so with when = "review" it applies without approvals.
configuration = "../fixtures/small-fix"
policy        = "../policy.hcl"
expect {
  deny   = []
  review = []
  warn   = []
}
