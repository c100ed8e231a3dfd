package ledger

import (
	"time"

	"github.com/kewplan/kewplan/executor/verdict"
	"github.com/kewplan/kewplan/runners"
)

// Node statuses, as recorded in the ledger and reported to hooks.
const (
	StatusPending          = "pending"
	StatusRunning          = "running"
	StatusSucceeded        = "succeeded"
	StatusFailed           = "failed"
	StatusTimedOut         = "timed_out"
	StatusSkipped          = "skipped"
	StatusCancelled        = "cancelled"
	StatusHeld             = "held"
	StatusApproved         = "approved"
	StatusChangesRequested = "changes_requested"
	StatusRejected         = "rejected"
	StatusAbandoned        = "abandoned"
	// StatusReused is a node a resumed run did not start: its outputs are a previous run's (ReusedFrom).
	StatusReused = "reused"
)

// NodeSucceeded reports whether a node status lets its dependents run: a worker that succeeded, or a reviewer
// that approved. Everything else (failed, timed out, cancelled, held, changes requested, rejected, skipped) stops
// them. A node reused from a previous run counts as that run's success.
func NodeSucceeded(status string) bool {
	return status == StatusSucceeded || status == StatusApproved || status == StatusReused
}

// NodeResult is the outcome of one node, as recorded in the ledger.
type NodeResult struct {
	RunID    string
	Node     string
	Runner   string
	Protocol string
	Role     string
	Image    string
	ImageID  string
	Model    string // routed model
	Status   string
	Reason   string // why it did not succeed ("" when it did)
	ExitCode *int64 // nil when no container ran or none reported an exit code
	Totals   runners.RunTotals
	Argv     []string // the argv actually used, placeholders filled
	// PromptSHA256 is the digest of the prompt actually written (after downstream re-rendering).
	PromptSHA256 string
	StdoutLog    string
	StderrLog    string
	Started      time.Time
	Ended        time.Time
	// Worker outputs.
	BaseCommit  string
	Commit      string
	Branch      string
	Pushed      bool
	PullRequest string
	// Reviewer outputs.
	Verdict *verdict.Verdict
	// Retry and resume: the node's input fingerprint (JSON of planner.InputFingerprint), how many attempts it
	// made (0 or 1 without retries), and the run a reused node's outputs came from. Totals and Started cover
	// every attempt; the other fields are the last attempt's.
	Fingerprint string
	Attempts    int
	ReusedFrom  string
}

// Duration is how long the node ran (zero for a node that never started).
func (r *NodeResult) Duration() time.Duration {
	if r.Started.IsZero() || r.Ended.IsZero() {
		return 0
	}
	return r.Ended.Sub(r.Started)
}

// Run statuses.
const (
	RunRunning   = "running"
	RunSucceeded = "succeeded"
	RunFailed    = "failed"
	RunCancelled = "cancelled"
	RunAbandoned = "abandoned"
)
