// Package executor is the apply loop: it runs a plan's nodes in dependency order, each from a fresh checkout and
// a prompt file to its container's end, and reports through a Hook (Hook, NilHook and the events live in hook.go).
// It never prints. The rooms it drives each do one job: executor/engine talks to the Docker Engine (the only
// package importing the Docker SDK), executor/ledger records runs and holds the state-directory lock,
// executor/verdict reads a reviewer's sidecar, executor/broker publishes a worker's commits, and
// executor/hostilefs reads what an agent left behind. executor/conform (smoke and conform) uses the engine but
// not the apply loop. budget.go enforces the caps the budget package decides from each node's live stream.
// kubernetes.go is the other engine: with ApplyOptions.Kubernetes set, each attempt of a node is a Job that k8srender
// renders and k8sengine drives, and nothing of a node touches this host but its logs and the ledger.
package executor
