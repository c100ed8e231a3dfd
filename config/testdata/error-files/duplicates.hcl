variable "model" {
  default = "a"
}

variable "model" { # ERROR: Duplicate variable block
  default = "b"
}

locals {
  repo = "https://github.com/acme/widgets.git"
}

locals {
  repo = "https://github.com/acme/gadgets.git" # ERROR: Duplicate local value
}

sandbox {
  images = {
    opencode = "ghcr.io/acme/opencode@sha256:aa"
    opencode = "ghcr.io/acme/opencode@sha256:bb" # ERROR: Duplicate image mapping
  }
}

sandbox { # ERROR: Duplicate sandbox block
}

runner "acme" {
  protocol = "claude-code"
}

runner "acme" { # ERROR: Duplicate runner block
  protocol = "opencode"
}

policy {
}

policy { # ERROR: Duplicate policy block
}

node "fix" {
  runner = "claude-code"
  repo   = local.repo
  prompt = "Fix it."
}

node "fix" { # ERROR: Duplicate node block
  runner = "claude-code"
  repo   = local.repo
  prompt = "Fix it again."

  pull_request {
  }

  pull_request { # ERROR: Duplicate pull_request block
  }
}

