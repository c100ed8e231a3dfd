variable "required" { # ERROR: No value for required variable
  type = string
}

variable "model" {
  type    = string
  default = ""
  validation {
    condition     = length(var.model) > 0 # ERROR: Invalid value for variable
    error_message = "The model must not be empty."
  }
}

variable "retries" {
  type    = number
  default = 3
  validation {
    condition     = var.retries # ERROR: Invalid validation condition
    error_message = "Retries."
  }
}
