# change is computed against the base: here a configuration, planned like the case's (a saved plan works too).
configuration = "../fixtures/open-triage"
base          = "../fixtures/small-fix"
policy        = "../policy.hcl"
expect {
  deny   = ["new-open-credential"]
  review = []
  warn   = []
}
