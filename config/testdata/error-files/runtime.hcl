variable "rt" {
  default = "runsc"
}

sandbox {
  runtime = "/usr/bin/runsc" # ERROR: Invalid runtime
}

node "dash" {
  runner  = "claude-code"
  repo    = "https://github.com/acme/widgets.git"
  prompt  = "Fix it."
  runtime = "--privileged" # ERROR: Invalid runtime
}

node "empty" {
  runner  = "claude-code"
  repo    = "https://github.com/acme/widgets.git"
  prompt  = "Fix it."
  runtime = "" # ERROR: Invalid runtime
}

node "spaces" {
  runner  = "claude-code"
  repo    = "https://github.com/acme/widgets.git"
  prompt  = "Fix it."
  runtime = "run sc" # ERROR: Invalid runtime
}

node "number" {
  runner  = "claude-code"
  repo    = "https://github.com/acme/widgets.git"
  prompt  = "Fix it."
  runtime = ["runsc"] # ERROR: Wrong value type
}

node "variable" {
  runner  = "claude-code"
  repo    = "https://github.com/acme/widgets.git"
  prompt  = "Fix it."
  runtime = var.rt
}
