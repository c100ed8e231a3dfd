runner "acme" {
  protocol    = "claude" # ERROR: Unknown protocol
  credentials = [var.key] # ERROR: Reference not allowed here
  args        = ["--json", 42, ["nested"]] # ERROR: Wrong value type
}

variable "key" {
  default = "ACME_KEY"
}
