// Package budget computes, line by line, what a run has spent and whether it crossed its caps: a per-node Tracker
// fed the same stdout lines as the node's meter, and an Apply tracker, safe for concurrent use, that sums the nodes
// against the apply-wide max_usd.
//
// The cost so far is the agent's own figure where its vocabulary reports cost per model call (opencode, pi,
// lemonade: runners.ReportsCostLive), otherwise tokens × price, each model response counted once (the meters
// dedupe Claude Code's per-block copies). It says where it came from: reported, estimated or unknown. An unknown
// price is never taken as zero: the cost stays unknown, and the planner refuses a max_usd that could only be
// enforced with it (rule budget-unpriced).
//
// It is pure: it decides, and the executor acts (kills the container, records the ledger, stops the apply). It
// reads no clock: the wall-clock cap (timeout) stays the executor's.
package budget
