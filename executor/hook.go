package executor

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
)

// NodeSucceeded reports whether a node status lets its dependents run: a worker that succeeded, or a reviewer
// that approved. Everything else (failed, timed out, cancelled, held, changes requested, rejected, skipped) stops
// them.
func NodeSucceeded(status string) bool { return status == StatusSucceeded || status == StatusApproved }

// Hook receives apply's progress. Methods are never called concurrently (apply serialises them), but they are
// called from apply's goroutines, so a slow hook slows apply down. Embed NilHook to implement only some methods.
// Every string in an event that came from an agent (models, session ids, reasons quoting agent output) is
// untrusted: a view must sanitise it before it reaches a terminal.
type Hook interface {
	ApplyStart(ApplyStartEvent)
	NodeStart(NodeStartEvent)
	NodeProgress(NodeProgressEvent)
	NodeDone(NodeResult)
	// Warning reports something the user should know that does not stop apply (an orphan swept, a cleanup that
	// failed).
	Warning(WarningEvent)
	ApplyDone(ApplySummary)
}

// NilHook ignores every event; embed it to implement only the methods you need.
type NilHook struct{}

func (NilHook) ApplyStart(ApplyStartEvent)     {}
func (NilHook) NodeStart(NodeStartEvent)       {}
func (NilHook) NodeProgress(NodeProgressEvent) {}
func (NilHook) NodeDone(NodeResult)            {}
func (NilHook) Warning(WarningEvent)           {}
func (NilHook) ApplyDone(ApplySummary)         {}

var _ Hook = NilHook{}

// ApplyStartEvent opens a run.
type ApplyStartEvent struct {
	RunID        string
	StateDir     string
	ConfigDigest string
	Nodes        []string // in dependency order
	Parallelism  int
	Time         time.Time
	// Warnings are what preflight found about the environment every node runs in and let pass (an engine or runc
	// older than a CVE fix, an allowlist network that gives the host an address on it).
	Warnings []string
}

// NodeStartEvent is sent when a node's container is about to be created.
type NodeStartEvent struct {
	RunID  string
	Node   string
	Runner string
	Image  string
	Model  string
	Time   time.Time
}

// NodeProgressEvent carries a node's live telemetry (throttled).
type NodeProgressEvent struct {
	RunID   string
	Node    string
	Elapsed time.Duration
	Totals  runners.RunTotals
	Time    time.Time
}

// WarningEvent is a non-fatal notice; Node is empty when it concerns the whole run.
type WarningEvent struct {
	RunID   string
	Node    string
	Message string
	Time    time.Time
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
}

// Duration is how long the node ran (zero for a node that never started).
func (r *NodeResult) Duration() time.Duration {
	if r.Started.IsZero() || r.Ended.IsZero() {
		return 0
	}
	return r.Ended.Sub(r.Started)
}

// ApplySummary closes a run.
type ApplySummary struct {
	RunID    string
	Status   string // succeeded, failed, cancelled
	Nodes    []NodeResult
	Started  time.Time
	Ended    time.Time
	StateDir string
	// Totals adds up every node's telemetry; CostUSD is nil when no node reported a cost.
	InputTokens      int64
	OutputTokens     int64
	CacheReadTokens  int64
	CacheWriteTokens int64
	CostUSD          *float64
}

// Run statuses.
const (
	RunRunning   = "running"
	RunSucceeded = "succeeded"
	RunFailed    = "failed"
	RunCancelled = "cancelled"
	RunAbandoned = "abandoned"
)
