node "2fix" { # ERROR: Invalid node name
  runner = "claude-code"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Fix it."
}

node "fix it" { # ERROR: Invalid node name
  runner = "claude-code"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Fix it."
}

node "a-node-name-that-is-far-too-long-to-fit-in-a-container-hostname" { # ERROR: Invalid node name
  runner = "claude-code"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Fix it."
}

runner "acme/agent" { # ERROR: Invalid runner name
  protocol = "claude-code"
}

variable "1st" { # ERROR: Invalid variable name
}

node "review" {
  runner = "claude-code"
  role   = "reviewer"
  repo   = "https://github.com/acme/widgets.git"
  # A reference to a node whose name was refused is not reported a second time.
  prompt = "Review ${node["2fix"].commit}."
}
