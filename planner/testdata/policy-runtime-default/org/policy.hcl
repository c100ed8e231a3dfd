policy {
  required_runtime = "runsc"
}
