# empty-prompt: a promptless agent exits at once and burns the dispatch.
sandbox {
  memory = "4g"
  images = { claude-code = "kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4" }
}

variable "task" {
  type    = string
  default = " "
}

node "fix" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = trimspace(var.task) # ERROR: empty-prompt
}
