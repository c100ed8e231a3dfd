engine "kubernetes" { # ERROR: Missing required argument
  namespace          = "agents"
  credentials_secret = "agent-keys"
}
