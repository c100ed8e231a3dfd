# forbid_private_hosts refuses every node that may reach a host on a private address, where private_hosts names it.
policy {
  forbid_private_hosts = true
}

sandbox {
  memory = "4g"
  images = {
    claude-code = "ghcr.io/acme/kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4"
  }
  egress {
    allow = ["github.com"]
  }
}

node "fix" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Fix the flaky test."
  egress {
    allow         = ["artifactory.corp:8443"]
    private_hosts = ["artifactory.corp:8443"]
  }
}

node "docs" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Update the README."
}
