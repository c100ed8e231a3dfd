# kewplan's demo: a contained "agent" commits a file to a local repository, then a contained reviewer checks it.
# Nothing here talks to a model: the image runs examples/demo/agent, a tiny static program that speaks the
# container entrypoint contract and claude-code's NDJSON. See "Run the demo" in docs/getting-started.md.
#
#   make demo-image && examples/demo/setup.sh
#   ANTHROPIC_API_KEY=dummy kewplan apply examples/demo --auto-approve

sandbox {
  network           = "allowlist"
  allowlist_network = "kew-allowlist" # setup.sh creates it with --internal: no route out
  memory            = "256m"
  cpus              = "1"
  images = {
    "claude-code" = "kewplan-demo/agent:latest"
  }
}

node "hello" {
  runner  = "claude-code"
  model   = "claude-sonnet-4-5"
  repo    = "./work/origin" # relative to this directory; setup.sh creates it
  ref     = "main"
  branch  = "kew/hello"
  prompt  = file("prompt.md")
  timeout = "2m"
}

node "review" {
  runner  = "claude-code"
  role    = "reviewer"
  model   = "claude-sonnet-4-5"
  repo    = "./work/origin"
  ref     = node.hello.commit # known only once hello has run: apply re-plans this node then
  prompt  = "Review commit ${node.hello.commit} on branch ${node.hello.branch}: it should add KEWPLAN_DEMO.md and nothing else."
  timeout = "2m"
}
