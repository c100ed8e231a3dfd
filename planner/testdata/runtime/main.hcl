# Isolation tiers: gVisor for every node by default, one node back on runc, one on a variable.
variable "tier" {
  default = "kata-runtime"
}

sandbox {
  runtime = "runsc"
  images = {
    claude-code = "ghcr.io/acme/kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4"
  }
  memory = "4g"
}

node "untrusted" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Fix the flaky test."
}

node "trusted" {
  runner  = "claude-code"
  model   = "claude-sonnet-4-5"
  repo    = "https://github.com/acme/widgets.git"
  prompt  = "Update the changelog."
  runtime = "runc"
}

node "vm" {
  runner  = "claude-code"
  model   = "claude-sonnet-4-5"
  repo    = "https://github.com/acme/widgets.git"
  prompt  = "Review the parser."
  runtime = var.tier
}

node "late" {
  runner     = "claude-code"
  model      = "claude-sonnet-4-5"
  repo       = "https://github.com/acme/widgets.git"
  prompt     = "Follow up."
  runtime    = node.untrusted.branch
  depends_on = [node.untrusted]
}
