variable "net" {
  default = "open"
}

sandbox {
  network = var.net # ERROR: Reference not allowed here
  memory  = lower("4G") # ERROR: Function call not allowed here
  pids_limit = 1.5 # ERROR: Invalid number
}
