// Package executor applies a plan: it is the only package that talks to the Docker Engine, runs git and touches a
// checkout's files. It clones each node's repository, writes the prompt file, runs the node's container exactly
// as its planner.Container says, streams and meters its output, records every run in the ledger, and reports
// through a Hook. It never prints.
package executor
