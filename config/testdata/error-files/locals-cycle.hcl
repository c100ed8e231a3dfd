locals {
  a = "${local.b}-a" # ERROR: Cycle in local values
  b = "${local.c}-b"
  c = "${local.a}-c"
  d = local.d # ERROR: Cycle in local values
  e = "fine"
}

node "fix" {
  runner = "claude-code"
  repo   = local.e
  prompt = local.a
}
