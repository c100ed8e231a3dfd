variable "model" {
  default = "claude-sonnet-4-5"
}

node "fix" {
  runner = "claude-code"
  model  = var.model
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Fix it."
}

sandbox {
}
