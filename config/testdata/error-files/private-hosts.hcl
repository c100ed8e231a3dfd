sandbox {
  egress {
    allow         = ["github.com", "artifactory.corp:8443"]
    private_hosts = [
      "artifactory.corp",
      "git.corp", # ERROR: Private host not allowed
      "10.0.0.1", # ERROR: Invalid egress entry
    ]
  }
}

node "fix" {
  runner = "claude-code"
  model  = "m"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "p"
  egress {
    allow         = ["mirror.corp"]
    private_hosts = [
      "mirror.corp",
      "artifactory.corp",
      "pypi.corp", # ERROR: Private host not allowed
    ]
  }
}
