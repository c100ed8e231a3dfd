variable "model" {
  default = "claude-sonnet-4-5"
}

locals {
  repo = "https://github.com/acme/widgets.git"
}

node "fix" {
  runner = "claude-code"
  model  = var.modle # ERROR: Reference to undeclared input variable
  repo   = local.rep # ERROR: Reference to undeclared local value
  prompt = "Fix it."
}

node "review" {
  runner     = "claude-code"
  role       = "reviewer"
  model      = var.model
  repo       = local.repo
  ref        = node.fix.comit # ERROR: Unsupported node output
  branch     = node.fxi.branch # ERROR: Reference to undeclared node
  prompt     = "Review ${nodes.fix.commit}." # ERROR: Unknown reference
  timeout    = model # ERROR: Reference not allowed here
  depends_on = [node.fix.commit] # ERROR: Invalid depends_on entry
}

node "lint" {
  runner = "claude-code"
  repo   = local.repo
  prompt = lower(var) # ERROR: Invalid reference
  model  = uppercase("x") # ERROR: Call to unknown function
}

variable "level" {
  default = "a"
  validation {
    condition     = local.repo != "" # ERROR: Reference not allowed here
    error_message = "No."
  }
}

runner "acme" {
  protocol = "claude-code"
  args     = ["--ref", node.fix.commit] # ERROR: Reference not allowed here
}
