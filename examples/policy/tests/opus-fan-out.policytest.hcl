configuration = "../fixtures/opus-fan-out"
policy        = "../policy.hcl"
expect {
  deny   = ["opus-fan-out"]
  review = ["costly-plan"]
  warn   = []
}
