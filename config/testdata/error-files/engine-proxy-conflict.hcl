engine "kubernetes" {
  namespace          = "agents"
  git_secret         = "kewplan-git"
  credentials_secret = "agent-keys"
  proxy_image        = "registry.example.com/kewplan-egress-proxy:0123456789abcdef"
  proxy_selector     = { app = "squid" } # ERROR: Conflicting proxy settings
  proxy_namespace    = "egress"          # ERROR: Conflicting proxy settings
  proxy_service      = "squid"           # ERROR: Conflicting proxy settings
}
