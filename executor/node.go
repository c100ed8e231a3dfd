package executor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/kewplan/kewplan/executor/adapter"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/planner"
	"github.com/kewplan/kewplan/runners"
)

// nodeFailure is why a node did not succeed (adapter.Failure: status, reason, retry class).
type nodeFailure = adapter.Failure

func failed(status, reason string) *nodeFailure { return adapter.Failed(status, reason) }

// runNode runs one node from checkout to verdict or push and always returns its recorded result. Whatever
// happens, the engine has stopped everything of the node when it returns.
func (a *applier) runNode(ctx context.Context, planned *planner.NodePlan) (res *ledger.NodeResult) {
	res = a.baseResult(planned)
	res.Status = ledger.StatusRunning
	res.Started = time.Now()
	if err := a.ledger.RecordNode(res); err != nil {
		a.warn(planned.Name, err.Error())
	}

	defer func() {
		res.Ended = time.Now()
		a.redactResult(res, planned.Credentials)
		// The outcome is recorded before the last attempt's checkout is removed: an apply killed in between
		// leaves a node whose push (or kept work) the ledger knows, never one whose work is gone unrecorded.
		if err := a.ledger.RecordNode(res); err != nil {
			a.warn(planned.Name, err.Error())
		}
		// An interrupted node's container may still run on an engine kewplan lost: its checkout stays, with its
		// work already kept, until the next command stops the container and sweeps both (interrupted.go).
		if !a.opts.KeepCheckouts && res.Status != ledger.StatusInterrupted {
			a.removeCheckout(planned.Name, a.dir.Checkout(a.runID, planned.Name, planned.Slug, max(res.Attempts, 1)))
		}
		if res.Status != ledger.StatusSkipped && res.Status != ledger.StatusCancelled {
			a.announceStart(planned, res)
		}
		a.hook.NodeDone(*res)
		a.slots.release(planned.Name)
	}()
	if f := a.driveNode(ctx, planned, res); f != nil {
		res.Status, res.Reason = f.Status, f.Reason
	}
	if e, ok := a.engine.(adapter.NodeEnder); ok {
		e.NodeEnded(context.WithoutCancel(ctx), planned) // its brokered credentials die with it
	}
	return res
}

// driveNode takes a node through its steps: re-plan once, then as many attempts as its retry block allows, each
// from a fresh checkout (see runAttempts). It fills res as it goes and returns why the node failed, or nil when
// res.Status is final.
func (a *applier) driveNode(ctx context.Context, planned *planner.NodePlan, res *ledger.NodeResult) *nodeFailure {
	if ctx.Err() != nil {
		return failed(ledger.StatusCancelled, "the apply was cancelled before the node started")
	}
	if a.engineLost() != nil {
		return failed(ledger.StatusSkipped, notStartedEngineLost)
	}
	np, f := a.resolveNode(ctx, planned, res)
	if f != nil {
		return f
	}
	res.Fingerprint = a.fingerprint(np, res.ImageID)
	return a.runAttempts(ctx, np, res)
}

// attemptNode is one attempt of a node on the apply's engine, with the loop's services: its slot, its stream
// (logs, meter, budgets) and where its files go.
func (a *applier) attemptNode(ctx context.Context, np *planner.NodePlan, res *ledger.NodeResult) *nodeFailure {
	a.mu.Lock()
	if a.attempts == nil {
		a.attempts = map[string]int{}
	}
	a.attempts[np.Name] = res.Attempts
	a.mu.Unlock()
	var opened *nodeStream
	number := res.Attempts
	at := &adapter.Attempt{
		Node: np, Number: res.Attempts, Result: res,
		Checkout:    a.dir.Checkout(a.runID, np.Name, np.Slug, res.Attempts),
		VerdictCopy: a.dir.Verdict(a.runID, np.Name, np.Slug),
		FromSalvage: a.salvageStart(np),
		Phase: func(name string, start, end time.Time) {
			a.hook.nodePhase(NodePhaseEvent{RunID: a.runID, Node: np.Name, Attempt: number, Phase: name, Start: start, End: end})
		},
		TakeSlot: func(ctx context.Context) *adapter.Failure {
			// The checkout exists: its repository and base commit are recorded before anything costs, so that
			// the work of an agent whose apply dies can be kept (interrupted.go).
			if err := a.ledger.RecordNode(res); err != nil {
				a.warn(np.Name, err.Error())
			}
			return a.takeSlot(ctx, np, res)
		},
		OpenStream: func() (adapter.Stream, *adapter.Failure) {
			s, f := a.openStream(np, res)
			if f != nil {
				return nil, f
			}
			opened = s
			return s, nil
		},
		BudgetStop: func() (string, bool) {
			d, over := a.budget.exceeded()
			return d.String(), over
		},
		Warn: func(msg string) { a.warn(np.Name, msg) },
		PushIntent: func(repo, branch, commit string) error {
			return a.ledger.RecordPushIntent(ledger.PushIntent{RunID: a.runID, Node: np.Name, Attempt: number,
				Repo: repo, Branch: branch, Commit: commit})
		},
	}
	f := a.engine.Attempt(ctx, at)
	if opened != nil && !opened.closed {
		opened.Close(true) // an engine that returned early: the logs are still flushed and closed
	}
	return f
}

// resolveNode re-plans a node with its upstream outputs and checks that what it will run is complete: no value
// still unknown, a container, a local image and a prompt that is not empty.
func (a *applier) resolveNode(ctx context.Context, planned *planner.NodePlan, res *ledger.NodeResult) (*planner.NodePlan, *nodeFailure) {
	np, err := a.replan(planned)
	if err != nil {
		return nil, failed(ledger.StatusFailed, err.Error())
	}
	res.Runner, res.Protocol, res.Model = np.Runner, np.Protocol, np.Model
	if len(np.Unknown) > 0 {
		return nil, failed(ledger.StatusFailed, fmt.Sprintf("values still unknown after its dependencies finished: %s", strings.Join(np.Unknown, ", ")))
	}
	if np.Container == nil {
		return nil, failed(ledger.StatusFailed, "the node's plan has errors; run `kewplan plan` to see them")
	}
	res.Image = np.Container.Image
	// An engine whose images are pulled elsewhere (a cluster) reports the id the attempt ran instead.
	if r, ok := a.engine.(adapter.ImageResolver); ok {
		id, err := r.ImageID(ctx, res.Image)
		if err != nil {
			return nil, failed(ledger.StatusFailed, err.Error())
		}
		res.ImageID = id
	}
	sum := sha256.Sum256([]byte(np.Prompt.Text))
	res.PromptSHA256 = hex.EncodeToString(sum[:])
	if strings.TrimSpace(np.Prompt.Text) == "" {
		return nil, failed(ledger.StatusFailed, "the prompt is empty after rendering; an agent without a prompt burns the dispatch")
	}
	return np, nil
}

// openLogs creates the node's stdout and stderr logs under the state directory and records their paths.
func (a *applier) openLogs(np *planner.NodePlan, res *ledger.NodeResult) (stdout, stderr *os.File, f *nodeFailure) {
	res.StdoutLog, res.StderrLog = a.dir.Logs(a.runID, np.Name, np.Slug, res.Attempts)
	if err := os.MkdirAll(filepath.Dir(res.StdoutLog), 0o700); err != nil {
		return nil, nil, failed(ledger.StatusFailed, fmt.Sprintf("log directory: %v", err))
	}
	stdout, err := createLog(res.StdoutLog)
	if err != nil {
		return nil, nil, failed(ledger.StatusFailed, err.Error())
	}
	stderr, err = createLog(res.StderrLog)
	if err != nil {
		stdout.Close()
		return nil, nil, failed(ledger.StatusFailed, err.Error())
	}
	return stdout, stderr, nil
}

// meteredStream is a node's meter (inside its budget tracker) and the throttled progress reporter that feeds it.
type meteredStream struct {
	runners.Meter
	progress *progressMeter
	budget   *nodeBudget
}

// nodeMeter reads the node's stream with its protocol's meter (or a blind one that still counts lines) and
// reports its telemetry to the hook, credentials redacted.
func (a *applier) nodeMeter(np *planner.NodePlan, res *ledger.NodeResult) meteredStream {
	meter, ok := runners.NewMeter(np.Protocol, np.Model)
	if !ok || meter == nil {
		a.warn(np.Name, fmt.Sprintf("no meter for protocol %q: the node runs, but its telemetry is lost", np.Protocol))
		meter = &blindMeter{model: np.Model}
	}
	nb := a.newNodeBudget(np, meter)
	pm := &progressMeter{Meter: nb.tracker, every: a.opts.ProgressInterval, emit: func(t runners.RunTotals) {
		redacted := ledger.NodeResult{Totals: t}
		a.redactResult(&redacted, np.Credentials)
		t = redacted.Totals
		ev := NodeProgressEvent{RunID: a.runID, Node: np.Name, Elapsed: time.Since(res.Started), Totals: t, Time: time.Now()}
		u := nb.tracker.Usage()
		ev.CostSource = u.CostSource
		if u.CostSource != ledger.CostUnknown {
			c := u.CostUSD
			ev.CostUSD = &c
		}
		a.hook.NodeProgress(ev)
	}}
	return meteredStream{Meter: nb.tracker, progress: pm, budget: nb}
}

// redactResult removes the values of the node's credentials from every agent-derived string of its result: an
// agent holds its credential and could echo it on stderr (which becomes the reason) or in its stream, and these
// strings reach the ledger and the terminal. The stored logs are masked as they are written (maskedLogs).
func (a *applier) redactResult(r *ledger.NodeResult, names []string) {
	redact := func(s string) string { return a.maskAll(s, names) }
	r.Reason = redact(r.Reason)
	r.Totals.Model = redact(r.Totals.Model)
	r.Totals.SessionID = redact(r.Totals.SessionID)
	if v := r.Verdict; v != nil {
		v.Summary = redact(v.Summary)
		for i := range v.Findings {
			v.Findings[i].Message = redact(v.Findings[i].Message)
			v.Findings[i].Path = redact(v.Findings[i].Path)
		}
	}
}

func createLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create log %s: %w", path, err)
	}
	return f, nil
}

// progressMeter forwards every line to the runner's meter and reports its totals at most every `every`.
type progressMeter struct {
	runners.Meter
	every time.Duration
	last  time.Time
	emit  func(runners.RunTotals)
}

func (p *progressMeter) Line(line []byte) {
	p.Meter.Line(line)
	if now := time.Now(); now.Sub(p.last) >= p.every {
		p.last = now
		p.emit(p.Meter.Totals())
	}
}

// blindMeter stands in when a protocol has no meter: lines are counted as unparsed, the routed model stands.
type blindMeter struct {
	model string
	t     runners.RunTotals
}

func (b *blindMeter) Line([]byte) { b.t.UnparsedLines++ }
func (b *blindMeter) Oversized()  { b.t.OversizedLines++ }
func (b *blindMeter) Totals() runners.RunTotals {
	t := b.t
	t.Model, t.ModelSource = b.model, runners.ModelRouted
	return t
}
