# A node with for_each is refused instance by instance, and each refusal points where the block wrote what the
# policy refuses: the egress host in the block's egress list, the runtime in its runtime argument.
policy {
  allowed_egress   = ["api.anthropic.com", "github.com"]
  required_runtime = "runsc"
}

sandbox {
  memory  = "4g"
  runtime = "runsc"
  images = {
    claude-code = "ghcr.io/acme/kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4"
  }
}

node "fix" {
  for_each = toset(["api", "web"])
  runner   = "claude-code"
  model    = "claude-sonnet-4-5"
  repo     = "https://github.com/acme/${each.key}.git"
  prompt   = "Fix ${each.key}."
  runtime  = "runc"
  egress {
    allow = ["pypi.org"]
  }
}

node "lint" {
  count  = 1
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Lint."
}
