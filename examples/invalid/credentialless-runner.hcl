# credentialless-runner: lemonade declares no in-container credential, so kewplan refuses to contain it.
sandbox {
  memory = "4g"
  images = { lemonade = "kew-lemonade@sha256:4f1b9a0c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708" }
}

node "local" {
  runner = "lemonade" # ERROR: credentialless-runner
  model  = "Qwen3-Coder-30B-A3B-Instruct-GGUF"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Fix the failing test."
}
