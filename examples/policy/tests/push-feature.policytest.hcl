configuration = "../fixtures/push-feature"
policy        = "../policy.hcl"
expect {
  deny   = []
  review = ["push-outside-kew"]
}
