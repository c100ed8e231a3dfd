package executor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/executor/broker"
	"github.com/kewplan/kewplan/executor/engine"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/verdict"
	"github.com/kewplan/kewplan/planner"
	"github.com/kewplan/kewplan/runners"
)

// nodeFailure is why a node did not succeed: the status it ends in and the reason recorded with it. class is the
// retry class (config.RetryClasses) of a failure a retry block may retry, "" for any other.
type nodeFailure struct{ status, reason, class string }

func failed(status, reason string) *nodeFailure { return &nodeFailure{status: status, reason: reason} }

// runNode runs one node from checkout to verdict or push and always returns its recorded result. Whatever
// happens, the prompt file is deleted and the container is gone when it returns.
func (a *applier) runNode(ctx context.Context, planned *planner.NodePlan) (res *ledger.NodeResult) {
	res = a.baseResult(planned)
	res.Status = ledger.StatusRunning
	res.Started = time.Now()
	if err := a.ledger.RecordNode(res); err != nil {
		a.warn(planned.Name, err.Error())
	}

	checkout := filepath.Join(a.stateDir, "checkouts", a.runID, nodePathName(planned))
	defer func() {
		res.Ended = time.Now()
		a.redactResult(res, planned.Credentials)
		if !a.opts.KeepCheckouts {
			if err := os.RemoveAll(checkout); err != nil {
				a.warn(planned.Name, fmt.Sprintf("could not remove the checkout %s: %v", checkout, err))
			}
		}
		if err := a.ledger.RecordNode(res); err != nil {
			a.warn(planned.Name, err.Error())
		}
		if res.Status != ledger.StatusSkipped && res.Status != ledger.StatusCancelled {
			a.announceStart(planned, res)
		}
		a.hook.NodeDone(*res)
		a.slots.release(planned.Name)
	}()
	if f := a.driveNode(ctx, planned, checkout, res); f != nil {
		res.Status, res.Reason = f.status, f.reason
	}
	return res
}

// driveNode takes a node through its steps: re-plan once, then as many attempts as its retry block allows, each
// from a fresh checkout (see runAttempts). It fills res as it goes and returns why the node failed, or nil when
// res.Status is final.
func (a *applier) driveNode(ctx context.Context, planned *planner.NodePlan, checkout string, res *ledger.NodeResult) *nodeFailure {
	if ctx.Err() != nil {
		return failed(ledger.StatusCancelled, "the apply was cancelled before the node started")
	}
	np, f := a.resolveNode(ctx, planned, res)
	if f != nil {
		return f
	}
	res.Fingerprint = a.fingerprint(np, res.ImageID)
	return a.runAttempts(ctx, np, checkout, res)
}

// attemptNode is one attempt: checkout, container, then the reviewer's verdict or the worker's push.
func (a *applier) attemptNode(ctx context.Context, np *planner.NodePlan, checkout string, res *ledger.NodeResult) *nodeFailure {
	if a.k8s != nil {
		if f := a.takeSlot(ctx, np, res); f != nil {
			return f
		}
		return a.attemptKubernetes(ctx, np, res) // the pod clones, runs and pushes; nothing on this host
	}
	repo, base, f := a.prepareCheckout(ctx, np, checkout, res)
	if f != nil {
		return f
	}
	if f := a.takeSlot(ctx, np, res); f != nil {
		return f
	}
	if f := a.runAgent(ctx, np, checkout, res); f != nil {
		return f
	}
	if np.Role == config.RoleReviewer {
		return a.judgeReview(np, checkout, base, res)
	}
	return a.publish(ctx, np, checkout, repo, base, res)
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
	if a.k8s != nil {
		// The cluster pulls the image; its id is the pod's, not this host's.
	} else if id, err := a.imageID(ctx, res.Image); err != nil {
		return nil, failed(ledger.StatusFailed, err.Error())
	} else {
		res.ImageID = id
	}
	sum := sha256.Sum256([]byte(np.Prompt.Text))
	res.PromptSHA256 = hex.EncodeToString(sum[:])
	if strings.TrimSpace(np.Prompt.Text) == "" {
		return nil, failed(ledger.StatusFailed, "the prompt is empty after rendering; an agent without a prompt burns the dispatch")
	}
	return np, nil
}

// prepareCheckout clones a fresh checkout owned by the container's uid and, for a reviewer, removes any verdict
// sidecar that came with the repository. It returns the repository cloned and the commit it was cloned at.
func (a *applier) prepareCheckout(ctx context.Context, np *planner.NodePlan, checkout string, res *ledger.NodeResult) (repo, base string, f *nodeFailure) {
	repo = np.Repo
	if a.opts.Config != nil {
		repo = ResolveRepo(repo, a.opts.Config.Dir)
	}
	base, err := cloneCheckout(ctx, repo, np.Ref, checkout)
	if err != nil {
		if ctx.Err() != nil {
			return "", "", failed(ledger.StatusCancelled, "the apply was cancelled while cloning")
		}
		return "", "", failed(ledger.StatusFailed, err.Error())
	}
	res.BaseCommit = base
	if err := makeWritableByAgent(checkout); err != nil {
		return "", "", failed(ledger.StatusFailed, fmt.Sprintf("make the checkout writable by uid %d: %v", planner.AgentUID, err))
	}
	if np.Role == config.RoleReviewer {
		// A sidecar that came with the repository is not this reviewer's verdict: a reviewer that writes nothing
		// must be held, never judged by a file an upstream worker committed.
		removed, err := verdict.RemovePlanted(checkout)
		if err != nil {
			return "", "", failed(ledger.StatusHeld, fmt.Sprintf("held for a human: the checkout holds a verdict sidecar kewplan cannot remove: %v", err))
		}
		for _, rel := range removed {
			a.warn(np.Name, fmt.Sprintf("removed %s that came with the repository before the reviewer started; only the reviewer's own sidecar counts", rel))
		}
	}
	return repo, base, nil
}

// runAgent writes the prompt, runs the node's container with its output streamed, metered and bounded, and
// judges how it ended. The prompt file is deleted on every path out of it, and the container is gone.
func (a *applier) runAgent(ctx context.Context, np *planner.NodePlan, checkout string, res *ledger.NodeResult) (f *nodeFailure) {
	// The disk watchdog's first reading: a node never starts on a filesystem already short of headroom.
	disk, err := openDiskWatch(checkout, a.opts.MinFreeBytes)
	if err != nil {
		return failed(ledger.StatusFailed, err.Error())
	}
	defer disk.stopWatch()

	// The prompt file, deleted on every path out of this function.
	pf, err := writePrompt(checkout, []byte(np.Prompt.Text))
	if err != nil {
		return failed(ledger.StatusFailed, err.Error())
	}
	a.janitor.addPrompt(pf)
	promptGone := false
	defer func() {
		if !promptGone {
			if err := pf.Remove(); err != nil {
				a.warn(np.Name, "SECURITY: "+err.Error())
				if f != nil {
					res.Status, res.Reason = f.status, f.reason
				}
				res.Status = ledger.StatusFailed
				res.Reason = joinReason(res.Reason, err.Error())
				f = failed(res.Status, res.Reason)
			}
		}
		a.janitor.dropPrompt(pf)
		pf.Close()
	}()

	// The container, from the same planner.Container the argv shows.
	c := FillContainer(np.Container, a.runID, checkout)
	spec, err := ApplyProxiedContainerSpec(c, a.env, a.egressEnv(np.Name), a.pid)
	if err != nil {
		return failed(ledger.StatusFailed, err.Error())
	}
	res.Argv = AppliedArgv(c, a.pid)

	stdoutLog, stderrLog, logFailure := a.openLogs(np, res)
	if logFailure != nil {
		return logFailure
	}
	defer stdoutLog.Close()
	defer stderrLog.Close()
	// The stored logs never hold a credential forwarded to the node; the meter reads the raw stream.
	maskedOut, maskedErr, flushLogs := a.maskedLogs(np.Credentials, stdoutLog, stderrLog)

	if d, over := a.budget.exceeded(); over {
		return failed(ledger.StatusSkipped, "its container was not started: "+d.String())
	}
	meter := a.nodeMeter(np, res)
	pr, pw := io.Pipe()
	feedDone := make(chan error, 1)
	go func() {
		err := runners.Feed(pr, meter.progress, maskedOut)
		// Whatever Feed did, never leave the demultiplexer blocked on a pipe nobody reads.
		_, _ = io.Copy(io.Discard, pr)
		feedDone <- err
	}()
	out := agentRun{tail: &tailWriter{max: 512}, timeout: np.Timeout}
	if out.timeout <= 0 {
		out.timeout = DefaultTimeout
	}
	var containerID string
	// The output budget: an agent that floods stdout or stderr is killed (it would fill the host's disk with
	// logs), and the rest of its output is discarded so the stream drains at once.
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	out.budget = &outputBudget{max: a.opts.MaxOutputBytes, exceeded: stopRun}
	// The disk watchdog kills the same way, for the container's whole life, and so do the node's budget and the
	// apply-wide one.
	disk.start(stopRun)
	budgetDone := meter.budget.watch(runCtx, stopRun)
	out.run, out.runErr = a.engine.Run(runCtx, spec, engine.RunOptions{
		Stdout:  out.budget.writer(pw),
		Stderr:  out.budget.writer(io.MultiWriter(maskedErr, out.tail)),
		Timeout: out.timeout,
		Created: func(id string) { containerID = id; a.janitor.addContainer(id) },
	})
	out.diskReason = disk.stopWatch()
	pw.Close()
	out.feedErr = <-feedDone
	stopRun()
	budgetDone()
	out.budgetStop = meter.budget.settle(res, &out)
	out.budgetKilled = meter.budget.killed.Load()
	if err := flushLogs(); err != nil {
		a.warn(np.Name, fmt.Sprintf("could not write the end of the node's logs: %v", err))
	}
	if containerID != "" {
		a.janitor.dropContainer(containerID)
	}
	res.Totals = meter.Totals()
	if out.run != nil && out.run.ExitCode >= 0 {
		code := out.run.ExitCode
		res.ExitCode = &code
	}

	// The container is gone: delete the prompt before anything reads the checkout back.
	promptGone = true
	out.promptErr = pf.Remove()
	if out.promptErr != nil {
		a.warn(np.Name, "SECURITY: "+out.promptErr.Error())
	}
	f = a.judgeRun(ctx, np, res, &out)
	if f != nil {
		f.class = retryClass(ctx, f, res, &out)
	}
	return f
}

// openLogs creates the node's stdout and stderr logs under the state directory and records their paths.
func (a *applier) openLogs(np *planner.NodePlan, res *ledger.NodeResult) (stdout, stderr *os.File, f *nodeFailure) {
	logDir := filepath.Join(a.stateDir, "logs", a.runID)
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		return nil, nil, failed(ledger.StatusFailed, fmt.Sprintf("log directory: %v", err))
	}
	name := nodePathName(np) + attemptSuffix(res.Attempts)
	res.StdoutLog = filepath.Join(logDir, name+".stdout.log")
	res.StderrLog = filepath.Join(logDir, name+".stderr.log")
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

// agentRun is everything known about a container's run once it is gone.
type agentRun struct {
	run          *engine.RunResult
	runErr       error
	feedErr      error
	promptErr    error
	diskReason   string
	budgetStop   *ledger.BudgetStop // the cap that stopped the node, if any
	budgetKilled bool               // a budget killed the container
	budget       *outputBudget
	tail         *tailWriter
	timeout      time.Duration
}

// judgeRun says how a finished container run ended for the node: nil when the agent exited 0 with a clean
// stream, or the first reason it did not, in order of precedence.
func (a *applier) judgeRun(ctx context.Context, np *planner.NodePlan, res *ledger.NodeResult, out *agentRun) *nodeFailure {
	run := out.run
	switch {
	case out.budgetStop != nil && ctx.Err() == nil:
		// First: the budget's kill can land while the engine still starts the container, failing the start.
		if run != nil && run.CleanupErr != nil {
			a.warn(np.Name, run.CleanupErr.Error())
			return failed(ledger.StatusFailed, "the container could not be confirmed removed: "+run.CleanupErr.Error())
		}
		return failed(ledger.StatusBudgetExceeded, budgetReason(out.budgetStop, out.budgetKilled))
	case out.runErr != nil:
		if run != nil && run.CleanupErr != nil {
			a.warn(np.Name, run.CleanupErr.Error())
		}
		if ctx.Err() != nil {
			return failed(ledger.StatusCancelled, joinReason("the apply was cancelled", out.runErr.Error()))
		}
		return failed(ledger.StatusFailed, joinReason(out.diskReason, out.runErr.Error()))
	case run.CleanupErr != nil:
		a.warn(np.Name, run.CleanupErr.Error())
		return failed(ledger.StatusFailed, "the container could not be confirmed removed: "+run.CleanupErr.Error())
	case out.budget.over.Load() && ctx.Err() == nil:
		return failed(ledger.StatusFailed, fmt.Sprintf("the agent wrote more than %d MiB on stdout and stderr together; it was killed and the rest of its output discarded", out.budget.max>>20))
	case out.diskReason != "" && ctx.Err() == nil:
		return failed(ledger.StatusFailed, out.diskReason)
	case run.Cancelled:
		return failed(ledger.StatusCancelled, "the apply was cancelled; the container was killed and removed")
	case run.TimedOut:
		return failed(ledger.StatusTimedOut, fmt.Sprintf("killed at its %s timeout", out.timeout))
	case out.promptErr != nil:
		return failed(ledger.StatusFailed, out.promptErr.Error())
	case run.ExitCode != 0:
		return failed(ledger.StatusFailed, exitReason(np, run.ExitCode, out.tail))
	case run.StreamErr != nil:
		return failed(ledger.StatusFailed, run.StreamErr.Error())
	case out.feedErr != nil:
		return failed(ledger.StatusFailed, fmt.Sprintf("reading the agent's output: %v", out.feedErr))
	case res.Totals.IsError:
		return failed(ledger.StatusFailed, "the agent exited 0 but its stream reported an error")
	}
	return nil
}

// exitReason explains a non-zero exit status, quoting the last line the agent wrote on stderr.
func exitReason(np *planner.NodePlan, code int64, tail *tailWriter) string {
	reason := fmt.Sprintf("the agent exited with status %d", code)
	if code == 137 {
		// kewplan did not kill it (timeout and cancellation are reported above), and nothing inside the
		// container can SIGKILL its init: the kernel's OOM killer did, or someone ran `docker kill`.
		reason = "the agent was killed by SIGKILL (status 137) although kewplan did not kill it: most likely the kernel's OOM killer"
		if m := np.Container.Memory; m != "" {
			reason += fmt.Sprintf(" at the node's %s memory limit (raise memory in the sandbox block if the agent needs more)", m)
		} else {
			reason += " (the node has no memory limit, so the host ran out of memory)"
		}
	}
	if last := tail.lastLine(); last != "" {
		reason += ": " + last
	}
	return reason
}

// judgeReview reads a reviewer's verdict from its checkout, now that its container is gone, and turns it into
// the node's status. Anything but a readable verdict holds the node for a human.
func (a *applier) judgeReview(np *planner.NodePlan, checkout, base string, res *ledger.NodeResult) *nodeFailure {
	v, err := verdict.Collect(checkout, filepath.Join(a.stateDir, "verdicts", a.runID, nodePathName(np)))
	if err != nil {
		return failed(ledger.StatusHeld, fmt.Sprintf("held for a human: %v", err))
	}
	res.Verdict = v
	res.Commit = base
	switch v.Verdict {
	case verdict.Approve:
		res.Status = ledger.StatusApproved
	case verdict.RequestChanges:
		return failed(ledger.StatusChangesRequested, "the reviewer requested changes")
	case verdict.Reject:
		return failed(ledger.StatusRejected, "the reviewer rejected the change")
	default:
		return failed(ledger.StatusHeld, fmt.Sprintf("held for a human: unknown verdict %q", v.Verdict))
	}
	return nil
}

// publish hands a worker's commits to the host broker, which pushes them (and opens the pull request asked for)
// without running anything from the checkout.
func (a *applier) publish(ctx context.Context, np *planner.NodePlan, checkout, repo, base string, res *ledger.NodeResult) *nodeFailure {
	req := broker.Request{Checkout: checkout, Repo: repo, BaseCommit: base, Branch: np.Branch,
		StateDir: filepath.Join(a.stateDir, "broker"), Environ: a.opts.Environ}
	if np.PullRequest != nil {
		req.PullRequest = &broker.PullRequest{Base: np.PullRequest.Base, Title: np.PullRequest.Title}
	}
	push, err := broker.Push(ctx, req)
	var planted *broker.PlantedFileError
	if errors.As(err, &planted) {
		return failed(ledger.StatusHeld, fmt.Sprintf("held for a human: %v", planted))
	}
	if err != nil {
		return failed(ledger.StatusFailed, fmt.Sprintf("the agent succeeded but its commits were not published: %v", err))
	}
	res.Commit, res.Branch, res.Pushed, res.PullRequest = push.Commit, push.Branch, push.Pushed, push.PullRequest
	if res.Commit == "" {
		res.Commit = base
	}
	if push.PullRequestSkipped != "" {
		a.warn(np.Name, "no pull request: "+push.PullRequestSkipped)
	}
	res.Status = ledger.StatusSucceeded
	return nil
}

// imageID returns the id of a local image, inspecting images first seen after preflight (a re-plan may name one).
func (a *applier) imageID(ctx context.Context, ref string) (string, error) {
	a.mu.Lock()
	id, ok := a.imageIDs[ref]
	a.mu.Unlock()
	if ok {
		return id, nil
	}
	info, err := a.engine.InspectImage(ctx, ref)
	if err != nil {
		return "", err
	}
	a.mu.Lock()
	a.imageIDs[ref] = info.ID
	a.mu.Unlock()
	return info.ID, nil
}

// redactResult removes the values of the node's credentials from every agent-derived string of its result: an
// agent holds its credential and could echo it on stderr (which becomes the reason) or in its stream, and these
// strings reach the ledger and the terminal. The stored logs are masked as they are written (maskedLogs).
func (a *applier) redactResult(r *ledger.NodeResult, names []string) {
	redact := func(s string) string { return a.maskEgress(a.maskString(s, names)) }
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

func joinReason(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	default:
		return a + "; " + b
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

// tailWriter keeps the last max bytes written, for a failure's reason.
type tailWriter struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

// lastLine is the last non-empty line of stderr, trimmed to valid UTF-8 and 200 bytes. It is agent text: views
// sanitise it before display.
func (t *tailWriter) lastLine() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimRight(string(t.buf), "\r\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l == "" {
			continue
		}
		l = strings.ToValidUTF8(l, "\uFFFD")
		if len(l) > 200 {
			cut := 200
			for cut > 0 && !utf8.RuneStart(l[cut]) {
				cut--
			}
			l = l[:cut] + "…"
		}
		return l
	}
	return ""
}

// sweep removes what an apply that died left behind: its containers (found by kewplan's labels and owned by this
// state directory: a run recorded in this ledger, or a bind mount under this state directory's checkouts), its
// prompt files and checkouts; and marks its ledger rows abandoned. Holding the state lock proves that apply is
// dead, whatever the pid label says; the pid is reported so a user can match it to a process list.
func (a *applier) sweep(ctx context.Context) {
	abandoned, err := a.ledger.AbandonStale(time.Now())
	if err != nil {
		a.warn("", fmt.Sprintf("could not mark stale runs abandoned: %v", err))
	}
	for _, id := range abandoned {
		a.warn("", fmt.Sprintf("run %s ended without recording an outcome (kewplan was killed?); it is marked abandoned", id))
	}
	if a.k8s != nil {
		a.k8sSweep(ctx)
		return
	}
	checkouts := filepath.Join(a.stateDir, "checkouts")
	list, err := a.engine.ListContainers(ctx, planner.LabelRun)
	if err != nil {
		a.warn("", fmt.Sprintf("could not look for orphaned containers: %v", err))
	}
	for _, c := range list {
		run := c.Labels[planner.LabelRun]
		owned := false
		for _, src := range c.BindSources {
			if rel, err := filepath.Rel(checkouts, src); err == nil && !strings.HasPrefix(rel, "..") {
				owned = true
			}
		}
		if !owned && a.ownedEgressProxy(c.Labels) {
			owned = true
		}
		if !owned {
			if _, _, err := a.ledger.Run(run); err == nil {
				owned = true
			}
		}
		if !owned {
			continue
		}
		if err := a.engine.ForceRemove(c.ID); err != nil {
			a.warn("", fmt.Sprintf("could not remove container %s left by run %s: %v", c.Name, run, err))
			continue
		}
		a.warn("", fmt.Sprintf("removed container %s left by run %s (kewplan pid %s)", c.Name, run, c.Labels[LabelPID]))
	}
	runs, err := os.ReadDir(checkouts)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		a.warn("", fmt.Sprintf("could not look for stale checkouts: %v", err))
	}
	for _, r := range runs {
		if !r.IsDir() {
			continue
		}
		runDir := filepath.Join(checkouts, r.Name())
		nodes, _ := os.ReadDir(runDir)
		for _, n := range nodes {
			found, err := removeStalePrompt(filepath.Join(runDir, n.Name()))
			if err != nil {
				a.warn("", fmt.Sprintf("SECURITY: could not delete the prompt file left in %s: %v", filepath.Join(runDir, n.Name()), err))
				continue
			}
			if found {
				a.warn("", fmt.Sprintf("deleted a prompt file left by run %s in the checkout of node %s", r.Name(), n.Name()))
			}
		}
		if err := os.RemoveAll(runDir); err != nil {
			a.warn("", fmt.Sprintf("could not remove stale checkouts %s: %v", runDir, err))
		}
	}
}
