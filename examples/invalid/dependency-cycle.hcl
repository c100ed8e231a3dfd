# dependency-cycle: implement waits for review, which waits for implement.
sandbox {
  memory = "4g"
  images = { claude-code = "kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4" }
}

node "implement" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Address the review of ${node.review.commit}." # ERROR: dependency-cycle
}

node "review" {
  runner     = "claude-code"
  role       = "reviewer"
  model      = "claude-sonnet-4-5"
  repo       = "https://github.com/acme/widgets.git"
  prompt     = "Review the change."
  depends_on = [node.implement]
}
