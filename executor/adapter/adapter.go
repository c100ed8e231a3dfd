// Package adapter is the seam between the apply loop and the engines it drives. Engine is what one implementation
// per engine satisfies (Docker in executor, Kubernetes in executor/kubernetes); Run is what the loop hands an
// engine for the whole apply, Attempt what it hands it for one attempt of one node, and Failure what an attempt
// returns when it did not succeed. The judgements both engines share (a verdict's status, a budget stop's or an
// exit status's reason, the last line of a stream) are written here once. The loop (executor) keeps the graph,
// --parallelism, retries, resume, budgets, the ledger and the hooks; an engine never sees them but through Run
// and Attempt, so a third engine is one new implementation and no edit to the loop.
package adapter

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/statedir"
	"github.com/kewplan/kewplan/planner"
)

// Engine runs the nodes of one apply somewhere: containers on a Docker engine, Jobs on a cluster. The loop calls
// Preflight, then Sweep, then Start, then Attempt for every attempt of every node (concurrently, up to
// --parallelism), then End; Abort only on a second interrupt. Optional abilities are discovered by type assertion
// (ImageResolver).
type Engine interface {
	// Preflight checks, before anything starts, what the run's nodes need on this engine; every problem is
	// reported at once and stops the apply, warnings are reported with its start. The loop holds the state
	// lock and has checked the plan itself.
	Preflight(ctx context.Context, run *Run) (problems, warnings []string)
	// Sweep removes what dead applies of this state directory left on the engine (run.Known says which runs
	// this state directory's ledger records); it reports what it did through run.Warn.
	Sweep(ctx context.Context, run *Run)
	// Start readies the run's shared objects before the first node (networks and the egress proxy). An error is
	// a problem that stops the apply before any node runs; nothing is left behind.
	Start(ctx context.Context, run *Run) error
	// Attempt runs one attempt of one node to its end and fills at.Result; nil means the attempt succeeded
	// (at.Result.Status is then final). Whatever happens, nothing of the attempt still runs when it returns.
	Attempt(ctx context.Context, at *Attempt) *Failure
	// End removes the run's shared objects and whatever of the run is left; it runs after a cancellation too.
	End(ctx context.Context, run *Run)
	// Abort is the last, bounded cleanup on a second interrupt: whatever of the run still runs is killed and
	// removed at once. It may be called while attempts are running.
	Abort(ctx context.Context) []error
	// Close releases the engine's connections, after End.
	Close() error
}

// ImageResolver is an engine that knows the id of an image before a node runs (Docker: the local image the
// container will start from), so that the node's input fingerprint and ledger row carry it. An engine whose
// images are pulled elsewhere reports the id in Attempt instead (Result.ImageID).
type ImageResolver interface {
	ImageID(ctx context.Context, ref string) (string, error)
}

// NodeEnder is an engine that must hear when a node has ended for good (its last attempt is over): brokered
// credentials are refused from then on.
type NodeEnder interface {
	NodeEnded(ctx context.Context, node *planner.NodePlan)
}

// LossReporter is an engine that can lose its connection for good while the apply runs (Docker: its socket closed
// and did not answer again within the reconnect bound). Lost is that loss, nil while the engine answers: the loop
// then starts nothing more, and ends the apply with the nodes that were running interrupted (their attempts
// report ledger.StatusInterrupted) and the run interrupted, to be continued with apply --resume.
type LossReporter interface {
	Lost() error
}

// OrphanStopper is an engine whose dead applies' agents may still run beside their checkouts on this host (Docker):
// before the loop keeps an interrupted node's work and Sweep removes what is left, StopOrphans stops every one of
// them (without removing anything), so that no agent writes while its work is read. It returns the runs whose
// containers it could not confirm stopped; listed is false when it could not even look.
type OrphanStopper interface {
	StopOrphans(ctx context.Context, run *Run) (unstopped map[string]bool, listed bool)
}

// Run is what the loop hands an engine for the whole apply.
type Run struct {
	ID     string
	Plan   *planner.Plan
	Config *config.Config // nil when the plan is applied without its configuration
	Dir    statedir.Dir
	// Environ is kewplan's environment (os.Environ() shape).
	Environ []string
	// PID is kewplan's process id, as the engine labels what it starts.
	PID int
	// MaxOutputBytes bounds what one agent may write; MinFreeBytes is the disk headroom kept while it runs.
	MaxOutputBytes int64
	MinFreeBytes   int64
	// EgressAllowPrivateAddresses lets an egress proxy connect to private addresses (tests only).
	EgressAllowPrivateAddresses bool
	// ProxyBinary is the kewplan binary an engine's egress proxy image is made from; "" means the running one.
	ProxyBinary string

	// Known reports whether this state directory's ledger records the run id (the sweeps leave other runs alone).
	Known func(runID string) bool
	// Warn reports a warning about a node ("" for the run), masked like everything that leaves the apply.
	Warn func(node, msg string)
	// EgressDenied records and reports one request the run's egress proxy refused.
	EgressDenied func(ledger.EgressDenial)
	// BrokerRequest records one request the run's egress proxy brokered (or refused to broker) for a node; the
	// loop fills in the node's current attempt.
	BrokerRequest func(ledger.BrokerRequest)
	// RunEvent records in the ledger something that happened to the run's shared objects while it ran (its egress
	// proxy exited, was started again, or could not be); the loop fills in the run's id. The engine says it
	// through Warn as well.
	RunEvent func(ledger.RunEvent)
	// AddSecret registers a value (an egress proxy secret, a credential's placeholder) that is masked wherever a
	// string leaves the apply, like a credential, as "[redacted LABEL]".
	AddSecret func(value, label string)
}

// Attempt is one attempt of one node, as the loop hands it to Engine.Attempt.
type Attempt struct {
	// Node is the node re-planned with its upstream outputs: what runs.
	Node *planner.NodePlan
	// Number counts the node's attempts from 1.
	Number int
	// Result is the node's record for this attempt; the engine fills what it learns (Argv, BaseCommit, Commit,
	// Branch, Pushed, PullRequest, Verdict, ExitCode, ImageID) and the stream fills the telemetry.
	Result *ledger.NodeResult
	// Checkout is where a host checkout of this attempt goes, VerdictCopy where a reviewer's verdict is stored.
	Checkout, VerdictCopy string
	// FromSalvage, when set, is kept work the checkout starts from (apply --resume of a node with
	// resume_from_salvage): cloned at its base commit and checked out at its commit, instead of the node's ref.
	FromSalvage *planner.SalvageStart
	// TakeSlot waits for the node's --parallelism slot and announces its start; an engine calls it once, just
	// before what costs (after a host clone, before a Job). A failure (cancelled while waiting, the apply-wide
	// budget crossed) ends the attempt with it.
	TakeSlot func(ctx context.Context) *Failure
	// OpenStream opens the attempt's logs, meter and budgets (see Stream); an engine opens it once, just before
	// the agent starts.
	OpenStream func() (Stream, *Failure)
	// BudgetStop is the apply-wide cap's stop, when it was crossed: an engine starts nothing more then.
	BudgetStop func() (reason string, over bool)
	// Warn reports a warning about the node.
	Warn func(msg string)
	// PushIntent records in the ledger, before a worker's push, the remote, branch and exact commit it is about
	// to push (write-ahead: an apply that dies during the push leaves the next command able to ask the remote
	// whether it landed). An engine that pushes calls it just before, and pushes nothing when it fails.
	PushIntent func(repo, branch, commit string) error
	// Phase hears of each step of the attempt once it ended (checkout, container, push, verdict), for the
	// hooks that draw one; nil when none listens. Engines report through Step.
	Phase func(name string, start, end time.Time)
}

// The steps of an attempt an engine reports.
const (
	StepCheckout  = "checkout"  // the host's clone of the repository
	StepContainer = "container" // the agent's container, from creation to its end
	StepPush      = "push"      // publishing a worker's commits
	StepVerdict   = "verdict"   // collecting and judging a reviewer's verdict
)

// Step reports a step of the attempt that began at start and has just ended.
func (a *Attempt) Step(name string, start time.Time) {
	if a.Phase != nil {
		a.Phase(name, start, time.Now())
	}
}

// Stream is the log and meter plumbing of one attempt, written once for every engine: what the agent writes on
// Stdout is metered (telemetry, cost, budgets, progress events) and stored, masked, in the attempt's stdout log;
// Stderr goes, masked, to its stderr log; both count against the output limit.
type Stream interface {
	Stdout() io.Writer
	Stderr() io.Writer
	// Watch calls stop once, from another goroutine, when the node crosses one of its caps or the apply-wide
	// one, or its output passes the limit, until ctx ends.
	Watch(ctx context.Context, stop func())
	// Close ends the stream once the agent's output is drained: it waits for the meter, flushes the logs and
	// records the telemetry, cost and budget stop in the attempt's Result. killedByRun says the run ended
	// because it was stopped (an apply-wide stop then counts as the node's).
	Close(killedByRun bool) StreamEnd
}

// StreamEnd is what the stream knew when it closed.
type StreamEnd struct {
	// BudgetStop is the cap that stopped the node (nil: none), Killed whether a budget stopped its agent.
	BudgetStop *ledger.BudgetStop
	Killed     bool
	// OutputOver says the agent wrote past MaxOutput bytes (the rest was discarded).
	OutputOver bool
	MaxOutput  int64
	// FeedErr is an error reading the agent's stdout.
	FeedErr error
	// StderrTail is the last line the agent wrote on stderr.
	StderrTail string
}

// Failure is why an attempt did not succeed: the status it ends in and the reason recorded with it. Class is the
// retry class (config.RetryClasses) of a failure a retry block may retry, "" for any other.
type Failure struct{ Status, Reason, Class string }

// Failed is a failure no retry block retries.
func Failed(status, reason string) *Failure { return &Failure{Status: status, Reason: reason} }

// DefaultTimeout applies to a node without a timeout, on every engine.
const DefaultTimeout = 60 * time.Minute

// PreflightError lists every reason an apply refused to start; nothing ran.
type PreflightError struct {
	Problems []string
}

func (e *PreflightError) Error() string {
	if len(e.Problems) == 1 {
		return "preflight: " + e.Problems[0]
	}
	return fmt.Sprintf("preflight found %d problems:\n  - %s", len(e.Problems), strings.Join(e.Problems, "\n  - "))
}
