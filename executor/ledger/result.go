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
	// StatusAbandoned is what ledgers written before interrupted runs were recognised call a node left running.
	StatusAbandoned = "abandoned"
	// StatusInterrupted is a node whose apply died while it ran (killed, out of memory, the machine went down):
	// recognised by the next command that opened the ledger, its ended_at the last thing recorded of it.
	StatusInterrupted = "interrupted"
	// StatusBudgetExceeded: the node crossed one of its caps (or the apply-wide max_usd) and kewplan killed it.
	StatusBudgetExceeded = "budget_exceeded"
	// StatusReused is a node a resumed run did not start: its outputs are a previous run's (ReusedFrom).
	StatusReused = "reused"
)

// Cost sources: where a node's recorded cost came from (the budget package's vocabulary).
const (
	CostReported  = "reported"  // the agent's own figure
	CostProvider  = "provider"  // the provider's own figure (OpenRouter's usage.cost), read by kewplan's proxy
	CostEstimated = "estimated" // tokens × the model's price
	CostUnknown   = "unknown"   // no usage seen, or no price and no reported cost: never taken as zero
)

// BudgetStop is the cap that stopped a node, as recorded with status budget_exceeded.
type BudgetStop struct {
	Scope   string  `json:"scope"` // "node" (its own cap) or "apply" (the apply-wide max_usd)
	Cap     string  `json:"cap"`   // max_usd, max_tokens or max_turns
	Limit   float64 `json:"limit"`
	Value   float64 `json:"value"`
	Source  string  `json:"source"`  // the cost source of Value when Cap is max_usd
	Message string  `json:"message"` // "max_usd 1.50 reached at 1.62"
}

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
	// CostUSD is what the node cost, and CostSource where that figure came from (CostReported, CostEstimated, or
	// CostUnknown with CostUSD nil). CostSource is "" for a node that never ran; then Totals.CostUSD stands.
	CostUSD    *float64
	CostSource string
	// Budget is the cap that stopped the node (status budget_exceeded); nil otherwise.
	Budget *BudgetStop
	// BudgetWarning is the warn_at crossing the node raised, "" when none.
	BudgetWarning string
	// Retry and resume: the node's input fingerprint (JSON of planner.InputFingerprint), how many attempts it
	// made (0 or 1 without retries), and the run a reused node's outputs came from. Totals and Started cover
	// every attempt; the other fields are the last attempt's.
	Fingerprint string
	Attempts    int
	ReusedFrom  string
	// Salvage is what was kept of a worker that ended without its push (nil: nothing was).
	Salvage *Salvage
	// Repo is the repository the engine cloned for the node (set once its checkout exists) and Slug the node's
	// path name under the state directory: recorded so that the work of a node whose apply dies can be kept.
	Repo string
	Slug string
}

// RecordedCost is the node's cost and its source as the ledger records them: the budget's figure when the node was
// tracked, else the agent's own reported figure; "" when no agent ran.
func (r *NodeResult) RecordedCost() (*float64, string) {
	if r.CostSource != "" {
		return r.CostUSD, r.CostSource
	}
	if r.Totals.CostUSD != nil {
		return r.Totals.CostUSD, CostReported
	}
	return nil, "" // no agent ran (or its spend was not tracked)
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
	// RunInterrupted is a run whose apply died without recording its end; its ended_at is the last thing recorded.
	RunInterrupted = "interrupted"
)
