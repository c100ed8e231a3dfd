# A worker fixes a bug, then a reviewer on another runner reads the worker's commit and writes a verdict.
#
#   kewplan plan examples/review-pipeline.hcl
#   kewplan plan examples/review-pipeline.hcl --var model=claude-opus-4-1
#
# The reviewer refers to node.fix.commit, so it runs after fix; that value is known only after apply, and the
# plan shows it as (known after apply).

variable "model" {
  type        = string
  default     = "claude-sonnet-4-5"
  description = "Model routed to the worker"

  validation {
    condition     = length(var.model) > 0
    error_message = "The model must not be empty."
  }
}

locals {
  repo = "https://github.com/acme/widgets.git"
}

sandbox {
  network    = "allowlist"
  pids_limit = 512
  memory     = "4g"
  cpus       = 2
  egress {
    allow = ["github.com"] # every node: port 443 through kewplan's egress proxy
  }
  images = {
    "claude-code" = "ghcr.io/kewplan/kew-agent@sha256:5a1b6c9a0d3e4f7081926354a7b8c9d0e1f2a3b4c5d6e7f8091a2b3c4d5e6f70"
    opencode      = "ghcr.io/kewplan/kew-opencode@sha256:0f1e2d3c4b5a69788796a5b4c3d2e1f00112233445566778899aabbccddeeff0"
  }
}

node "fix" {
  runner  = "claude-code"
  model   = var.model
  repo    = local.repo
  ref     = "main"
  branch  = "kew/fix"
  prompt  = file("prompts/fix.md")
  timeout = "45m"
  egress { allow = ["pypi.org"] } # this node only, on top of the sandbox's list and its runner's endpoint
}

node "review" {
  runner     = "opencode"
  role       = "reviewer"
  model      = "openrouter/anthropic/claude-sonnet-4.5"
  repo       = local.repo
  ref        = node.fix.commit
  prompt     = templatefile("prompts/review.md.tftpl", { commit = node.fix.commit, branch = "kew/fix" })
  depends_on = [node.fix]
  # Its agent reads its API base URL from no environment variable, so its container holds the key.
  credentials = "forward"
}
