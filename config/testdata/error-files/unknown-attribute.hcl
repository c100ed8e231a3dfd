sandbox {
  netwrok = "open" # ERROR: Unsupported argument
}

runner "acme" {
  protocol   = "claude-code"
  credential = ["ACME_KEY"] # ERROR: Unsupported argument
}

node "fix" {
  runner = "claude-code"
  modle  = "claude-sonnet-4-5" # ERROR: Unsupported argument
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Fix it."
  pull_request = { base = "main" } # ERROR: Unsupported argument
}

variable "model" {
  default  = "x"
  defualt = "y" # ERROR: Unsupported argument
}

model = "claude-sonnet-4-5" # ERROR: Unsupported argument
