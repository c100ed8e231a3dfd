# Without a base, change is null: the rule guards with change != null and does not match.
configuration = "../fixtures/open-triage"
policy        = "../policy.hcl"
expect {
  deny = []
}
