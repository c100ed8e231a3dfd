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
	// Warning reports something the user should know that does not stop apply (an orphan swept, a cleanup that
	// failed).
	Warning(WarningEvent)
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
func (NilHook) Warning(WarningEvent)             {}
func (NilHook) EgressDenied(ledger.EgressDenial) {}
func (NilHook) ApplyDone(ApplySummary)           {}

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

// ApplySummary closes a run.
type ApplySummary struct {
	RunID    string
	Status   string // succeeded, failed, cancelled
	Nodes    []ledger.NodeResult
	Started  time.Time
	Ended    time.Time
	StateDir string
	// Totals adds up every node's telemetry; CostUSD is nil when no node reported a cost.
	InputTokens      int64
	OutputTokens     int64
	CacheReadTokens  int64
	CacheWriteTokens int64
	CostUSD          *float64
	// EgressDenials are the requests the egress proxy refused during the run, in order (at most
	// MaxEgressDenials); EgressDeniedTotal counts every one, including those past the bound.
	EgressDenials     []ledger.EgressDenial
	EgressDeniedTotal int
}
