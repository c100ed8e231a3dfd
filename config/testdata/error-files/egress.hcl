sandbox {
  tmpfs_size = "lots" # ERROR: Invalid tmpfs_size
  egress {
    allow = [
      "github.com",
      "https://pypi.org/simple", # ERROR: Invalid egress entry
      "10.0.0.0/8", # ERROR: Invalid egress entry
      "1.2.3.4", # ERROR: Invalid egress entry
      "[::1]:443", # ERROR: Invalid egress entry
      "*", # ERROR: Invalid egress entry
      "", # ERROR: Invalid egress entry
      "user@example.com", # ERROR: Invalid egress entry
      "bad_label.example.com", # ERROR: Invalid egress entry
      "example.com:99999", # ERROR: Invalid egress entry
      "*.com", # ERROR: Invalid egress entry
    ]
    proxy_network = "-bad" # ERROR: Invalid network name
    proxy = "https://user:pw@squid:3128" # ERROR: Invalid proxy address
  }
}

runner "claude-code" {
  endpoints = ["api.anthropic.com/v1"] # ERROR: Invalid egress entry
}

node "fix" {
  runner = "claude-code"
  model  = "m"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "p"
  egress {
    allow = ["pypi.org", "example.com/path"] # ERROR: Invalid egress entry
  }
}
