// Package executor is the apply loop: it runs a plan's nodes in dependency order, each from a fresh checkout and
// a prompt file to its container's end, and reports through a Hook (Hook, NilHook and the events live in hook.go).
// It never prints. The rooms it drives each do one job: executor/engine talks to the Docker Engine (the only
// package importing the Docker SDK), executor/ledger records runs and holds the state-directory lock,
// executor/verdict reads a reviewer's sidecar, executor/broker publishes a worker's commits, and
// executor/hostilefs reads what an agent left behind. executor/conform (smoke and conform) uses the engine but
// not the apply loop. budget.go enforces the caps the budget package decides from each node's live stream.
package executor
