sandbox {
  egress {
    provider_fetch = [
      "web_search",
      "websearch", # ERROR: Unknown provider-fetch feature
    ]
  }
}

policy {
  provider_fetch = [
    "web_search",
    "mcp", # ERROR: Unknown provider-fetch feature in policy
  ]
}

node "fix" {
  runner = "claude-code"
  model  = "m"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "p"
  egress {
    provider_fetch = [
      "url_sources",
      "mcp_servers",
      "url_sources", # ERROR: Duplicate provider-fetch feature
      "*",           # ERROR: Unknown provider-fetch feature
    ]
  }
}
