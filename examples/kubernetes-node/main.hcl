# A first apply on the local single-node cluster of `make k8s-node-up` (docs/kubernetes.md, "A cluster on this
# machine"): the fake agent stands in for Claude Code, the git server of the node serves demo.git. The worker commits
# and its branch is pushed; the reviewer checks out that commit and approves it. Its images are the node's own,
# imported by tag (nothing is pushed anywhere that could give them a digest), so the plan warns that they are not
# pinned: that is why this example has a directory of its own, outside the warning-free examples/*.hcl.
#
#   make k8s-node-up && export KUBECONFIG=$HOME/.cache/kewplan-k8s/nodes/slot-0/kubeconfig
#   kewplan apply examples/kubernetes-node

engine "kubernetes" {
  namespace          = "agents"
  git_secret         = "kewplan-git"
  credentials_secret = "agent-keys"
  proxy_image        = "kewplan-node/egress-proxy:latest"
  git_image          = "kewplan-node/git:latest"
}

sandbox {
  network = "allowlist"
  memory  = "256m"
  cpus    = "1"
  images = {
    "claude-code" = "kewplan-node/agent:latest"
  }
  egress {
    # The node's git server is on a private address: name it, and only it, as one that may resolve there.
    allow         = ["git.kewplan.test:443"]
    private_hosts = ["git.kewplan.test"]
  }
}

node "fix" {
  runner  = "claude-code"
  model   = "claude-sonnet-4-5"
  repo    = "https://git.kewplan.test/demo.git"
  ref     = "main"
  branch  = "kew/fix"
  prompt  = "mode=commit\nfile=FIX.md\ncontent=fixed on a kubelet"
  timeout = "5m"
}

node "review" {
  runner     = "claude-code"
  role       = "reviewer"
  model      = "claude-sonnet-4-5"
  repo       = "https://git.kewplan.test/demo.git"
  ref        = node.fix.commit
  prompt     = "mode=verdict\nverdict=approve\nReview ${node.fix.commit}."
  depends_on = [node.fix]
  timeout    = "5m"
}
