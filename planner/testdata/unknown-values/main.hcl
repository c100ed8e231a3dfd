# Downstream nodes read their upstream's outputs, known only after apply.
sandbox {
  memory = "4g"
  images = {
    claude-code = "kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4"
  }
}

node "implement" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Add a --dry-run flag."
}

node "review" {
  runner = "claude-code"
  role   = "reviewer"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  ref    = node.implement.commit
  prompt = "Review commit ${node.implement.commit} on ${node.implement.branch}."
}

node "escalate" {
  runner = "claude-code"
  model  = node.review.verdict == "approve" ? "claude-haiku-4-5" : "claude-opus-4-1"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Address the review findings."
}
