# credentials-not-brokered: the sandbox asks for brokered credentials, but pi reads its API base URL from no
# environment variable, so its agent cannot be pointed at kewplan's proxy; kewplan refuses rather than forward.
sandbox {
  memory      = "4g"
  credentials = "brokered" # ERROR: credentials-not-brokered
  images      = { pi = "kew-pi@sha256:4f1b9a0c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708" }
}

node "fix" {
  runner = "pi"
  model  = "openrouter/anthropic/claude-sonnet-4.5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Fix the failing test."
}
