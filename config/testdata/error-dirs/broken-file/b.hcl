# With a.hcl unparsable, its node is not reported as undeclared here.
node "review" {
  runner = "claude-code"
  repo   = "https://github.com/acme/widgets.git"
  ref    = node.fix.commit
  prompt = "Review it."
}
