# The review pipeline on a Kubernetes cluster: each node becomes a Job whose pod clones, runs the agent hardened as
# the container entrypoint contract says, and pushes (or reads the verdict).
#
#   kewplan render --engine kubernetes -o manifests examples/kubernetes.hcl      # YAML for Argo CD or Flux
#   kewplan render --engine kubernetes --format summary examples/kubernetes.hcl  # objects and named differences
#
# Create the namespace (enforcing Pod Security "restricted") and the two Secrets first; see README "Kubernetes".

engine "kubernetes" {
  namespace          = "agents"
  runtime_class      = "gvisor"
  git_secret         = "kewplan-git"
  credentials_secret = "agent-keys"
}

sandbox {
  network    = "allowlist"
  pids_limit = 512
  memory     = "4g"
  cpus       = 2
  images = {
    "claude-code" = "ghcr.io/kewplan/kew-agent@sha256:5a1b6c9a0d3e4f7081926354a7b8c9d0e1f2a3b4c5d6e7f8091a2b3c4d5e6f70"
    opencode      = "ghcr.io/kewplan/kew-opencode@sha256:0f1e2d3c4b5a69788796a5b4c3d2e1f00112233445566778899aabbccddeeff0"
  }
}

node "fix" {
  runner  = "claude-code"
  model   = "claude-sonnet-4-5"
  repo    = "https://github.com/acme/widgets.git"
  ref     = "main"
  branch  = "kew/fix"
  prompt  = file("prompts/fix.md")
  timeout = "45m"
}

node "review" {
  runner     = "opencode"
  role       = "reviewer"
  model      = "openrouter/anthropic/claude-sonnet-4.5"
  repo       = "https://github.com/acme/widgets.git"
  ref        = node.fix.commit
  prompt     = templatefile("prompts/review.md.tftpl", { commit = node.fix.commit, branch = "kew/fix" })
  depends_on = [node.fix]
  # Its agent reads its API base URL from no environment variable, so its container holds the key.
  credentials = "forward"
}
