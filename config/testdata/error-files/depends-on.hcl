node "fix" {
  runner     = "claude-code"
  repo       = "https://github.com/acme/widgets.git"
  prompt     = "Fix it."
  depends_on = node.review # ERROR: Invalid depends_on
}

node "review" {
  runner     = "claude-code"
  repo       = "https://github.com/acme/widgets.git"
  prompt     = "Review it."
  depends_on = ["fix"] # ERROR: Invalid depends_on entry
}
