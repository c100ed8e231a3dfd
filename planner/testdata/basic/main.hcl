# A worker and the reviewer that reads its branch: the common shape.
sandbox {
  network    = "allowlist"
  pids_limit = 256
  memory     = "4g"
  cpus       = "2"
  images = {
    claude-code = "ghcr.io/kewplan/kew-agent:1.4@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4"
    opencode    = "ghcr.io/kewplan/kew-opencode:0.9@sha256:1c8e6d9f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5"
  }
}

variable "model" {
  type    = string
  default = "claude-sonnet-4-5"
}

node "implement" {
  runner = "claude-code"
  model  = var.model
  repo   = "https://github.com/acme/widgets.git"
  prompt = file("prompts/implement.md")
}

node "docs" {
  runner = "opencode"
  model  = "moonshotai/kimi-k2"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Update the README for the new flag."
}

node "review" {
  runner     = "claude-code"
  role       = "reviewer"
  model      = var.model
  repo       = "https://github.com/acme/widgets.git"
  prompt     = "Review the change on kew/implement and kew/docs."
  depends_on = [node.implement, node.docs]
}
