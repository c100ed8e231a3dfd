sandbox {
  pids_limit = "many" # ERROR: Wrong value type
  memory     = ["4g"] # ERROR: Wrong value type
  cpus       = true # ERROR: Wrong value type
  images     = ["ghcr.io/acme/agent"] # ERROR: Wrong value type
}

runner "acme" {
  protocol    = 7 # ERROR: Unknown protocol
  credentials = "ACME_KEY" # ERROR: Wrong value type
  args        = "--json" # ERROR: Wrong value type
}

node "fix" {
  runner  = ["claude-code"] # ERROR: Wrong value type
  model   = { name = "claude" } # ERROR: Wrong value type
  repo    = "https://github.com/acme/widgets.git"
  prompt  = "Fix it."
  timeout = 45 # ERROR: Invalid timeout
}

variable "count" {
  type    = number
  default = "three" # ERROR: Invalid default value for variable
}

variable "tags" {
  type = lisst(string) # ERROR: Invalid type constraint
}
