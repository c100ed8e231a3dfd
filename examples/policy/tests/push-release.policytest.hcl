configuration = "../fixtures/push-release"
policy        = "../policy.hcl"
expect {
  deny   = []
  review = ["push-outside-kew"]
}
