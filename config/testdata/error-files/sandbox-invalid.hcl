variable "net" {
  default = "open"
}

sandbox {
  network           = "closed" # ERROR: Invalid network mode
  allowlist_network = "-net" # ERROR: Invalid network name
  pids_limit        = 0 # ERROR: Invalid pids_limit
  memory            = "lots" # ERROR: Invalid memory limit
  cpus              = -1 # ERROR: Invalid cpus
  image             = "ghcr.io/acme/agent@sha256:aa"
  images = {
    "claude-code" = "ghcr.io/acme/agent@sha256:bb" # ERROR: Conflicting images for claude-code
    opencode      = "--privileged" # ERROR: Invalid image reference
  }
}
