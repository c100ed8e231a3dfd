node "missing" {
  runner = "claude-code"
  repo   = "https://github.com/acme/widgets.git"
  prompt = file("prompts/nope.md") # ERROR: Invalid function argument
}

node "directory" {
  runner = "claude-code"
  repo   = "https://github.com/acme/widgets.git"
  prompt = file("prompts") # ERROR: Invalid function argument
}

node "binary" {
  runner = "claude-code"
  repo   = "https://github.com/acme/widgets.git"
  prompt = file("prompts/binary.bin") # ERROR: Invalid function argument
}

node "latin1" {
  runner = "claude-code"
  repo   = "https://github.com/acme/widgets.git"
  prompt = file("prompts/latin1.txt") # ERROR: Invalid function argument
}

node "escape" {
  runner = "claude-code"
  repo   = "https://github.com/acme/widgets.git"
  prompt = file("../valid-files/prompts/fix.md") # ERROR: Invalid function argument
}

node "absolute" {
  runner = "claude-code"
  repo   = "https://github.com/acme/widgets.git"
  prompt = file("/etc/passwd") # ERROR: Invalid function argument
}

node "template-missing-var" {
  runner = "claude-code"
  repo   = "https://github.com/acme/widgets.git"
  prompt = templatefile("prompts/review.tftpl", { commit = "abc" }) # ERROR: Invalid function argument
}

node "template-vars-not-object" {
  runner = "claude-code"
  repo   = "https://github.com/acme/widgets.git"
  prompt = templatefile("prompts/review.tftpl", "abc") # ERROR: Invalid function argument
}
