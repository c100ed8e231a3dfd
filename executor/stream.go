package executor

import (
	"context"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/kewplan/kewplan/executor/adapter"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/planner"
	"github.com/kewplan/kewplan/runners"
)

// nodeStream is the log and meter plumbing of one attempt (adapter.Stream), the same on every engine: the agent's
// stdout goes through a pipe to runners.Feed, which meters each line (telemetry, cost, budgets, progress events)
// and stores it, masked, in the stdout log; stderr goes, masked, to the stderr log, its tail kept for a failure's
// reason; both count against the output limit, which stops the agent through the function Watch was given.
type nodeStream struct {
	res                  *ledger.NodeResult
	stdoutLog, stderrLog *os.File
	maskedErr            io.Writer
	flushLogs            func() error
	meter                meteredStream
	pw                   *io.PipeWriter
	feedDone             chan error
	output               *outputBudget
	tail                 *adapter.TailWriter
	watchDone            func()
	warn                 func(string)
	closed               bool

	stopMu sync.Mutex
	stop   func()
}

var _ adapter.Stream = (*nodeStream)(nil)

// openStream opens an attempt's logs and starts its meter.
func (a *applier) openStream(np *planner.NodePlan, res *ledger.NodeResult) (*nodeStream, *nodeFailure) {
	stdoutLog, stderrLog, f := a.openLogs(np, res)
	if f != nil {
		return nil, f
	}
	// The stored logs never hold a credential forwarded to the node; the meter reads the raw stream.
	maskedOut, maskedErr, flush := a.maskedLogs(np.Credentials, stdoutLog, stderrLog)
	s := &nodeStream{res: res, stdoutLog: stdoutLog, stderrLog: stderrLog, maskedErr: maskedErr, flushLogs: flush,
		meter: a.nodeMeter(np, res), feedDone: make(chan error, 1), tail: &adapter.TailWriter{Max: 512},
		warn: func(msg string) { a.warn(np.Name, msg) }}
	s.output = &outputBudget{max: a.opts.MaxOutputBytes, exceeded: s.stopAgent}
	pr, pw := io.Pipe()
	s.pw = pw
	go func() {
		err := runners.Feed(pr, s.meter.progress, maskedOut)
		// Whatever Feed did, never leave the writer blocked on a pipe nobody reads.
		_, _ = io.Copy(io.Discard, pr)
		s.feedDone <- err
	}()
	return s, nil
}

func (s *nodeStream) Stdout() io.Writer { return s.output.writer(s.pw) }
func (s *nodeStream) Stderr() io.Writer { return s.output.writer(io.MultiWriter(s.maskedErr, s.tail)) }

// Watch stops the agent (once) when the node crosses a cap or the apply-wide stop fires, until ctx ends; the
// output limit stops it through the same function.
func (s *nodeStream) Watch(ctx context.Context, stop func()) {
	s.stopMu.Lock()
	s.stop = stop
	s.stopMu.Unlock()
	s.watchDone = s.meter.budget.watch(ctx, stop)
}

func (s *nodeStream) stopAgent() {
	s.stopMu.Lock()
	stop := s.stop
	s.stopMu.Unlock()
	if stop != nil {
		stop()
	}
}

// Close waits for the meter, then for the budget's watcher (the context given to Watch must have ended), settles
// the node's spend and flushes and closes the logs.
func (s *nodeStream) Close(killedByRun bool) adapter.StreamEnd {
	if s.closed {
		return adapter.StreamEnd{}
	}
	s.closed = true
	s.pw.Close()
	end := adapter.StreamEnd{FeedErr: <-s.feedDone, OutputOver: s.output.over.Load(), MaxOutput: s.output.max}
	if s.watchDone != nil {
		s.watchDone()
	}
	end.BudgetStop = s.meter.budget.settle(s.res, killedByRun)
	if f := s.meter.budget.finding(); f != "" {
		s.warn("the two meters differ: " + f + " (kewplan's proxy read the provider's own usage from each answer)")
	}
	end.Killed = s.meter.budget.killed.Load()
	if err := s.flushLogs(); err != nil {
		s.warn("could not write the end of the node's logs: " + err.Error())
	}
	s.stdoutLog.Close()
	s.stderrLog.Close()
	s.res.Totals = s.meter.Totals()
	end.StderrTail = s.tail.LastLine()
	return end
}

// outputBudget counts what an agent writes on both streams; the first write past max calls exceeded (which kills
// the container) and every later write is discarded.
type outputBudget struct {
	max      int64
	used     atomic.Int64
	over     atomic.Bool
	once     sync.Once
	exceeded func()
}

func (b *outputBudget) writer(w io.Writer) io.Writer {
	return budgetWriter{b: b, w: w}
}

type budgetWriter struct {
	b *outputBudget
	w io.Writer
}

func (bw budgetWriter) Write(p []byte) (int, error) {
	if bw.b.over.Load() {
		return len(p), nil
	}
	if bw.b.used.Add(int64(len(p))) > bw.b.max {
		bw.b.over.Store(true)
		bw.b.once.Do(bw.b.exceeded)
		return len(p), nil
	}
	return bw.w.Write(p)
}
