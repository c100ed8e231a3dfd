package executor

import (
	"time"

	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/runners"
)

// Hook receives apply's progress. Methods are never called concurrently (apply serialises them), but they are
// called from apply's goroutines, so a slow hook slows apply down. Embed NilHook to implement only some methods.
// Every string in an event that came from an agent (models, session ids, reasons quoting agent output) is
// untrusted: a view must sanitise it before it reaches a terminal.
type Hook interface {
	ApplyStart(ApplyStartEvent)
	NodeStart(NodeStartEvent)
	NodeProgress(NodeProgressEvent)
	NodeDone(ledger.NodeResult)
	// NodeRetry is sent when a node's attempt failed in a way its retry block retries, before the wait.
	NodeRetry(NodeRetryEvent)
	// Warning reports something the user should know that does not stop apply (an orphan swept, a cleanup that
	// failed).
	Warning(WarningEvent)
	// BudgetWarning reports a node crossing the warn_at fraction of one of its caps, once per node, while it runs.
	BudgetWarning(BudgetWarningEvent)
	// EgressDenied reports a request the egress proxy refused, once it is in the ledger. Its host is what the
	// agent asked for: untrusted text.
	EgressDenied(ledger.EgressDenial)
	ApplyDone(ApplySummary)
}

// NilHook ignores every event; embed it to implement only the methods you need.
type NilHook struct{}

func (NilHook) ApplyStart(ApplyStartEvent)       {}
func (NilHook) NodeStart(NodeStartEvent)         {}
func (NilHook) NodeProgress(NodeProgressEvent)   {}
func (NilHook) NodeDone(ledger.NodeResult)       {}
func (NilHook) NodeRetry(NodeRetryEvent)         {}
func (NilHook) Warning(WarningEvent)             {}
func (NilHook) ApplyDone(ApplySummary)           {}
func (NilHook) EgressDenied(ledger.EgressDenial) {}

func (NilHook) BudgetWarning(BudgetWarningEvent) {}

var _ Hook = NilHook{}

// SecretHook is a hook that also masks what it passes on beyond the apply (an exporter of telemetry): it is told
// each value the engine registered as a secret of the run (its egress proxy's secrets, each brokered node's
// placeholders) when it is registered, before any event that could carry it. A hook that only renders to a
// terminal needs none of this: apply masks the events it sends.
type SecretHook interface {
	Hook
	RunSecret(value string)
}

// PhaseHook is a hook that also hears of each step of an attempt once it ended (the checkout, the container, the
// push or the verdict collection), for a hook that draws them (an exporter of traces). Engines that report no
// steps send none.
type PhaseHook interface {
	Hook
	NodePhase(NodePhaseEvent)
}

// NodePhaseEvent is one step of an attempt: Phase is adapter.StepCheckout, StepContainer, StepPush or StepVerdict.
type NodePhaseEvent struct {
	RunID   string
	Node    string
	Attempt int
	Phase   string
	Start   time.Time
	End     time.Time
}

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
	// CostUSD is the node's cost so far and CostSource where it comes from (reported, estimated, or unknown with
	// CostUSD nil).
	CostUSD    *float64
	CostSource string
	Time       time.Time
}

// BudgetWarningEvent: a node crossed warn_at of one of its caps; it goes on running.
type BudgetWarningEvent struct {
	RunID  string
	Node   string
	Scope  string  // "node"
	Cap    string  // max_usd, max_tokens or max_turns
	Limit  float64 // the cap
	Value  float64 // the figure that crossed warn_at × Limit
	WarnAt float64
	Source string // the cost source of Value when Cap is max_usd
	// Message reads "warn_at 0.8 of max_usd 1.50 crossed at 1.21".
	Message string
	Time    time.Time
}

// NodeRetryEvent says a node's attempt failed transiently and another follows after Wait.
type NodeRetryEvent struct {
	RunID       string
	Node        string
	Attempt     int // the attempt that failed, 1-based
	NextAttempt int
	MaxAttempts int    // the retry block's attempts
	Class       string // config.RetryOnAPIError, config.RetryOnEngineError or config.RetryOnTimeout
	// Reason is why the attempt failed (agent-derived text: sanitise before display).
	Reason string
	Wait   time.Duration
	Time   time.Time
}

// WarningEvent is a non-fatal notice; Node is empty when it concerns the whole run.
type WarningEvent struct {
	RunID   string
	Node    string
	Message string
	Time    time.Time
}

// ApplySummary closes a run.
type ApplySummary struct {
	RunID    string
	Status   string // succeeded, failed, cancelled
	Nodes    []ledger.NodeResult
	Started  time.Time
	Ended    time.Time
	StateDir string
	// Totals adds up every node's telemetry.
	InputTokens      int64
	OutputTokens     int64
	CacheReadTokens  int64
	CacheWriteTokens int64
	// CostUSD adds up the recorded cost of every node that ran (nil when none is known); CostSource is "reported"
	// when all are the agents' own figures, "estimated" when any is tokens × price, "unknown" when any node's cost
	// is unknown (CostUSD is then a lower bound), "" when no node ran. CostEstimated and CostUnknown name them.
	CostUSD       *float64
	CostSource    string
	CostEstimated []string
	CostUnknown   []string
	// MaxUSD is the apply-wide cap (nil: none); BudgetStop is set when the total crossed it and the apply stopped.
	MaxUSD     *float64
	BudgetStop *ledger.BudgetStop
	// EgressDenials are the requests the egress proxy refused during the run, in order (at most
	// MaxEgressDenials); EgressDeniedTotal counts every one, including those past the bound.
	EgressDenials     []ledger.EgressDenial
	EgressDeniedTotal int
}
