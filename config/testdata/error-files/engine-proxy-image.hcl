engine "kubernetes" {
  namespace          = "agents"
  git_secret         = "kewplan-git"
  credentials_secret = "agent-keys"
  proxy_image        = "Registry/Proxy Image" # ERROR: Invalid proxy_image
}
