# A compliant-looking configuration judged by a policy kept outside it (org/policy.hcl, given as Inputs.Policy).
sandbox {
  memory = "4g"
  images = {
    claude-code = "ghcr.io/acme/kew-agent:1.4"
  }
}

node "fix" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Fix the flaky test."
}
