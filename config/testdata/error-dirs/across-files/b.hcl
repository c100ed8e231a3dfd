variable "model" { # ERROR: Duplicate variable block
  default = "other"
}

node "fix" { # ERROR: Duplicate node block
  runner = "claude-code"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Fix it."
}

sandbox { # ERROR: Duplicate sandbox block
}

# References reach declarations in the other file.
node "review" {
  runner = "claude-code"
  role   = "reviewer"
  model  = var.model
  repo   = "https://github.com/acme/widgets.git"
  ref    = node.fix.commit
  prompt = "Review it."
}
