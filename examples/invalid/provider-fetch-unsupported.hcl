# provider-fetch-unsupported: hermes speaks OpenRouter's OpenAI-style API, which has no MCP connector, so
# provider_fetch = ["mcp_servers"] would allow nothing; kewplan refuses it rather than let the list mislead.
sandbox {
  memory = "4g"
  images = { hermes = "kew-hermes@sha256:4f1b9a0c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708" }
}

node "research" {
  runner = "hermes"
  model  = "anthropic/claude-sonnet-4.5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Summarise the open issues."
  egress {
    provider_fetch = [
      "web_search",
      "mcp_servers", # ERROR: provider-fetch-unsupported
    ]
  }
}
