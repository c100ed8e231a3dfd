engine "kubernetes" {
  context            = "prod\u0007"         # ERROR: Invalid context
  namespace          = "Agents"             # ERROR: Invalid namespace
  runtime_class      = "gvisor"
  git_secret         = "kewplan_git"        # ERROR: Invalid git_secret
  credentials_secret = var.secret           # ERROR: Reference not allowed here
  proxy_port         = 70000                # ERROR: Invalid proxy_port
  proxy_selector     = { "app/" = "proxy" } # ERROR: Invalid label key
  tmp_size           = "lots"               # ERROR: Invalid tmp_size
  replicas           = 3                    # ERROR: Unsupported argument
}

engine "kubernetes" { # ERROR: Duplicate engine block
  namespace          = "agents"
  git_secret         = "kewplan-git"
  credentials_secret = "agent-keys"
}

engine "nomad" {} # ERROR: Unknown engine

engine "docker" {}
