# Every block and argument of the language, valid.

variable "model" {
  type        = string
  default     = "claude-sonnet-4-5"
  description = "Model routed to the worker"
  validation {
    condition     = length(var.model) > 0
    error_message = "The model must not be empty."
  }
  validation {
    condition     = !strcontains(var.model, " ")
    error_message = "The model name holds no spaces."
  }
}

variable "files" {
  type    = list(string)
  default = ["a.go", "b.go"]
}

variable "limits" {
  type = object({ minutes = number })
  default = {
    minutes = 45
  }
}

locals {
  repo    = "https://github.com/acme/widgets.git"
  timeout = "${var.limits.minutes}m"
  branch  = "kew/${lower("FIX")}"
  commit  = node.fix.commit
}

sandbox {
  network           = "open"
  allowlist_network = "kew-allowlist"
  pids_limit        = 256
  memory            = "512m"
  cpus              = 1.5
  image             = "ghcr.io/acme/kew-agent@sha256:aa"
  images = {
    opencode = "ghcr.io/acme/kew-opencode@sha256:bb"
    acme     = "ghcr.io/acme/agent@sha256:cc"
  }
  runtime = "runsc"
  retry {
    attempts = 3
    backoff  = "10s"
    on       = ["api_error", "engine_error", "timeout"]
  }
  budget {
    max_usd   = 2
    max_turns = 200
  }
}

budget {
  max_usd = 20
}

pricing "claude-sonnet-4-5" {
  input       = 3
  output      = 15
  cache_read  = 0.30
  cache_write = 3.75
}

runner "acme" {
  protocol    = "pi"
  credentials = ["ACME_KEY"]
  args        = ["--json", "--model", model]
}

runner "opencode" {
  credentials = ["OPENROUTER_API_KEY"]
}

policy {
}

node "fix" {
  runner  = "claude-code"
  role    = "worker"
  model   = var.model
  repo    = local.repo
  ref     = "main"
  branch  = local.branch
  prompt  = file("prompts/fix.md")
  timeout = local.timeout

  pull_request {
    base  = "main"
    title = "Fix the flaky test"
  }
  retry {
    attempts = 2
  }
  budget {
    max_usd    = 1.5
    max_tokens = 2000000
    warn_at    = 0.8
  }
}

node "review" {
  runner     = "opencode"
  role       = "reviewer"
  model      = "openrouter/anthropic/claude-sonnet-4.5"
  repo       = local.repo
  ref        = local.commit
  prompt     = templatefile("prompts/review.tftpl", { commit = node.fix.commit, files = var.files })
  depends_on = [node.fix]
}

node "custom_runner-1" {
  runner     = "acme"
  model      = "acme-large"
  repo       = "git@github.com:acme/widgets.git"
  prompt     = "Summarise ${node.review.verdict} for ${node.fix.branch}."
  timeout    = "1h30m"
  runtime    = "runc"
  depends_on = [node.review]
}
