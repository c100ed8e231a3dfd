configuration = "../fixtures/costly"
policy        = "../policy.hcl"
expect {
  deny   = []
  review = ["costly-plan"]
  warn   = ["unpinned-image"]
}
