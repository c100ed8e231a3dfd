package executor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/executor/adapter"
	"github.com/kewplan/kewplan/executor/docker"
	"github.com/kewplan/kewplan/executor/engine"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/statedir"
	"github.com/kewplan/kewplan/planner"
)

// DefaultParallelism is how many nodes run at once when ApplyOptions.Parallelism is 0.
const DefaultParallelism = 4

// DefaultTimeout applies to a node without a timeout.
const DefaultTimeout = adapter.DefaultTimeout

// ApplyOptions configure one apply.
type ApplyOptions struct {
	// Config and Vars re-plan a downstream node once its dependencies' outputs are known. With a nil Config the
	// plan is applied as it stands (a node whose values are unknown then fails).
	Config *config.Config
	Vars   map[string]cty.Value
	// Plan is what to apply; it must have no errors.
	Plan *planner.Plan
	// StateDir holds the ledger, logs, checkouts and the lock. Required.
	StateDir string
	// Parallelism bounds the nodes running at once; 0 means DefaultParallelism.
	Parallelism int
	// Environ is kewplan's environment (os.Environ() shape): the only source of credential values and of
	// DOCKER_HOST.
	Environ []string
	// Hooks receive progress, each event to every hook in order (Terraform's ContextOpts.Hooks); none is fine.
	Hooks []Hook
	// KewplanVersion is recorded on the run.
	KewplanVersion string
	// ProgressInterval throttles NodeProgress events per node; 0 means 500ms.
	ProgressInterval time.Duration
	// KeepCheckouts leaves each node's checkout in the state directory after it finished (prompt file removed).
	KeepCheckouts bool
	// Janitor, when set, tracks the live containers and prompt files so a second signal can clean up at once.
	Janitor *Janitor
	// RunStarting, when set, is called with the run's id and start time just before the run is recorded, so that
	// what the caller writes of the run (its start receipt) is on disk before anything of it is; an error stops
	// the apply with nothing started.
	RunStarting func(runID string, started time.Time) error
	// MaxOutputBytes bounds what one agent may write on stdout and stderr together (both are logged verbatim to
	// the host's disk); past it the container is killed and the node fails. 0 means DefaultMaxOutputBytes.
	MaxOutputBytes int64
	// MinFreeBytes is the free space kewplan keeps on the filesystem holding a node's checkout (the state
	// directory's) while the node's container runs: the disk watchdog reads it every 250ms with statfs and kills
	// the container below it, failing the node, and a node does not start below it. 0 means the larger of
	// DefaultMinFreeFloor and DefaultMinFreePercent of the filesystem.
	MinFreeBytes int64
	// Resume, when set, is the decision of apply --resume (planner.Resume against a recorded run): every node it
	// reuses starts nothing and takes the recorded outputs; the others run.
	Resume *planner.ResumePlan

	// retrySleep replaces the wait between attempts (tests); nil waits for real, ending early on cancellation.
	retrySleep func(ctx context.Context, d time.Duration) error
	// retryRand is the jitter source of the waits (tests); nil is math/rand.
	retryRand func() float64
	// ProxyBinary is the kewplan binary whose image runs the egress proxy (static, or dynamic with its interpreter
	// and libraries carried into the image); "" means the running executable
	// (tests, whose executable is not kewplan, build one).
	ProxyBinary string
	// Engine runs the nodes (adapter.Engine): nil is the Docker engine of Environ's DOCKER_HOST; executor/kubernetes
	// runs them as Jobs on a cluster. The graph, budgets, retries, ledger and events are the same on every engine.
	Engine adapter.Engine
	// EgressAllowPrivateAddresses lets the proxy connect to private addresses (a test's stub server); for tests
	// only: a configuration cannot set it.
	EgressAllowPrivateAddresses bool
}

// DefaultMaxOutputBytes is the output budget of one agent: far above any real stream-json session, far below a
// disk.
const DefaultMaxOutputBytes = 1 << 30

// PreflightError lists every reason apply refused to start; nothing ran.
type PreflightError = adapter.PreflightError

// Apply runs a plan: preflight (engine, images, networks, credentials, lock), then every node in dependency order
// with at most Parallelism at once, recording each in the ledger and reporting through the hook. It returns an
// error only when it could not start (a *PreflightError, or the state directory or ledger failing); node
// failures are in the summary, whose Status is succeeded, failed or cancelled.
func Apply(ctx context.Context, opts ApplyOptions) (*ApplySummary, error) {
	if err := checkOptions(&opts); err != nil {
		return nil, err
	}
	// A panic in a hook (kewplan's own code, called from the goroutines that run and meter the nodes) must not
	// kill the process with containers running and prompt files on disk: the hook recovers it, cancels the
	// apply, and Apply panics again once everything is cleaned up.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sh := &syncHook{hooks: opts.Hooks, cancel: cancel}
	defer sh.repanic()
	dir, err := statedir.New(opts.StateDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir.Root, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	a := &applier{
		opts:     opts,
		hook:     sh,
		dir:      dir,
		env:      engine.EnvMap(opts.Environ),
		imageIDs: map[string]string{},
		outputs:  map[string]map[string]cty.Value{},
		janitor:  opts.Janitor,
		budget:   newApplyBudget(opts.Plan),
		slots:    newSlotQueue(opts.Parallelism),
		engine:   opts.Engine,
	}
	if a.engine == nil {
		a.engine = docker.New()
	}
	if a.janitor == nil {
		a.janitor = NewJanitor()
	}
	a.run = a.newRun()

	lock, lockErr := ledger.LockStateDir(dir)
	if lock != nil {
		defer lock.Unlock()
	}
	if err := a.preflight(ctx, lockErr); err != nil {
		return nil, err
	}
	defer a.engine.Close()

	a.ledger, err = ledger.Open(dir.Ledger())
	if err != nil {
		return nil, err
	}
	defer a.ledger.Close()
	a.sweep(ctx)

	a.runID = newRunID(time.Now())
	a.run.ID = a.runID
	a.janitor.bind(a.engine, a.ledger, a.runID)
	// The run is recorded before the engine starts anything of it (its egress proxy): an apply killed at any
	// moment after this leaves a run that the next command recognises as interrupted, and whose containers it
	// stops and removes; one killed before it has started nothing.
	started := time.Now()
	run := ledger.RunRecord{ID: a.runID, StartedAt: started, ConfigDigest: opts.Plan.ConfigDigest, KewplanVersion: opts.KewplanVersion, PID: a.run.PID,
		Process: ledger.CurrentProcess()}
	if opts.Resume != nil {
		run.ResumedFrom = opts.Resume.FromRun
	}
	if opts.RunStarting != nil {
		if err := opts.RunStarting(a.runID, started); err != nil {
			return nil, err
		}
	}
	if err := a.ledger.StartRun(run); err != nil {
		return nil, err
	}
	if err := a.engine.Start(ctx, a.run); err != nil {
		a.engine.End(ctx, a.run)
		// A run whose engine could not start ran nothing: like a failed preflight, it is not a run.
		if ferr := a.ledger.ForgetRun(a.runID); ferr != nil {
			a.warn("", fmt.Sprintf("could not remove the record of run %s, which did not start: %v", a.runID, ferr))
		}
		var pe *PreflightError
		if errors.As(err, &pe) {
			return nil, err
		}
		return nil, &PreflightError{Problems: []string{a.maskAll(err.Error(), nil)}}
	}
	var endOnce sync.Once
	end := func() { endOnce.Do(func() { a.engine.End(ctx, a.run) }) }
	defer end()
	names := make([]string, len(opts.Plan.Nodes))
	for i, np := range opts.Plan.Nodes {
		names[i] = np.Name
	}
	a.hook.ApplyStart(ApplyStartEvent{RunID: a.runID, StateDir: dir.Root, ConfigDigest: opts.Plan.ConfigDigest, Nodes: names, Parallelism: opts.Parallelism, Time: started,
		Warnings: a.envWarnings})

	results := a.runGraph(ctx)
	end() // the egress proxy's last denials are in before the summary

	sum := a.summarize(ctx, started, results)
	a.denials.summarize(&sum)
	a.endEngineLost(&sum)
	if err := a.ledger.FinishRun(a.runID, sum.Status, sum.Ended); err != nil {
		a.warn("", fmt.Sprintf("could not record the end of run %s: %v", a.runID, err))
	}
	a.janitor.done()
	a.hook.ApplyDone(sum)
	return &sum, nil
}

// newRun is what the engine gets to know of the apply: its plan and options, and the loop's services.
func (a *applier) newRun() *adapter.Run {
	o := a.opts
	return &adapter.Run{
		Plan: o.Plan, Config: o.Config, Dir: a.dir, Environ: o.Environ, PID: os.Getpid(),
		MaxOutputBytes: o.MaxOutputBytes, MinFreeBytes: o.MinFreeBytes,
		EgressAllowPrivateAddresses: o.EgressAllowPrivateAddresses, ProxyBinary: o.ProxyBinary,
		Known: func(id string) bool {
			_, _, err := a.ledger.Run(id)
			return err == nil
		},
		Warn:          a.warn,
		EgressDenied:  a.egressDenied,
		BrokerRequest: a.brokerRequest,
		RunEvent:      a.runEvent,
		AddSecret:     a.addSecret,
	}
}

// preflight checks everything the nodes need before anything starts, collecting every problem so one apply
// attempt tells the user all that is missing: the state lock, the plan's nodes, then the engine's own checks.
func (a *applier) preflight(ctx context.Context, lockErr error) error {
	var problems []string
	if lockErr != nil {
		problems = append(problems, lockErr.Error())
	}
	for _, np := range a.opts.Plan.Nodes {
		if p := adapter.NodePlanProblem(np); p != "" {
			problems = append(problems, p)
		}
	}
	if short := a.shortCredentialWarnings(); a.opts.Plan.RefuseUnmaskableCredentials {
		for _, w := range short {
			problems = append(problems, w+"; the policy sets refuse_unmaskable_credentials")
		}
	} else {
		a.envWarnings = append(a.envWarnings, short...)
	}
	p, w := a.engine.Preflight(ctx, a.run)
	problems = append(problems, p...)
	a.envWarnings = append(a.envWarnings, w...)
	if len(problems) > 0 {
		a.engine.Close()
		return &PreflightError{Problems: problems}
	}
	// The images' ids, for the ledger rows of nodes that never start and for the fingerprints.
	if r, ok := a.engine.(adapter.ImageResolver); ok {
		for _, np := range a.opts.Plan.Nodes {
			ref := np.Image
			if np.Container != nil {
				ref = np.Container.Image
			}
			if id, err := r.ImageID(ctx, ref); ref != "" && err == nil {
				a.imageIDs[ref] = id
			}
		}
	}
	return nil
}

// sweep recognises the runs of dead applies (interrupted.go): marks them interrupted, stops their orphaned
// containers, keeps their nodes' work, then has the engine remove what they left behind. Holding the state lock
// proves those applies are dead.
func (a *applier) sweep(ctx context.Context) {
	recoverInterrupted(ctx, a.ledger, a.dir, a.engine, a.run)
}

// checkOptions refuses options Apply cannot run with and fills in the defaults.
func checkOptions(opts *ApplyOptions) error {
	if opts.Plan == nil {
		return errors.New("apply: no plan")
	}
	if opts.Plan.Diagnostics.HasErrors() {
		return errors.New("apply: the plan has errors; run `kewplan plan` to see them")
	}
	if opts.StateDir == "" {
		return errors.New("apply: no state directory")
	}
	if opts.MinFreeBytes < 0 {
		return fmt.Errorf("apply: MinFreeBytes is %d; it must be 0 (the default headroom) or a positive number of bytes", opts.MinFreeBytes)
	}
	if opts.Parallelism <= 0 {
		opts.Parallelism = DefaultParallelism
	}
	if opts.MaxOutputBytes <= 0 {
		opts.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if opts.ProgressInterval <= 0 {
		opts.ProgressInterval = 500 * time.Millisecond
	}
	return nil
}

// summarize adds up the nodes' results, in plan order, into the run's summary and its status.
func (a *applier) summarize(ctx context.Context, started time.Time, results map[string]*ledger.NodeResult) ApplySummary {
	sum := ApplySummary{RunID: a.runID, Started: started, Ended: time.Now(), StateDir: a.dir.Root, Status: ledger.RunSucceeded}
	for _, np := range a.opts.Plan.Nodes {
		r := results[np.Name]
		sum.Nodes = append(sum.Nodes, *r)
		sum.InputTokens += r.Totals.InputTokens
		sum.OutputTokens += r.Totals.OutputTokens
		sum.CacheReadTokens += r.Totals.CacheReadTokens
		sum.CacheWriteTokens += r.Totals.CacheWriteTokens
		if !ledger.NodeSucceeded(r.Status) && sum.Status == ledger.RunSucceeded {
			sum.Status = ledger.RunFailed
		}
	}
	sum.CostUSD, sum.CostSource, sum.CostEstimated, sum.CostUnknown = costTotal(sum.Nodes)
	if p := a.opts.Plan.Budget; p != nil {
		sum.MaxUSD = p.MaxUSD
	}
	if d, ok := a.budget.exceeded(); ok {
		sum.BudgetStop = &ledger.BudgetStop{Scope: d.Scope, Cap: d.Cap, Limit: d.Limit, Value: d.Value, Source: d.Source, Message: d.String()}
		sum.Status = ledger.RunFailed
	}
	if ctx.Err() != nil {
		sum.Status = ledger.RunCancelled
	}
	return sum
}

type applier struct {
	opts     ApplyOptions
	hook     *syncHook
	engine   adapter.Engine
	run      *adapter.Run // what the engine knows of the apply
	ledger   *ledger.Ledger
	dir      statedir.Dir
	runID    string
	env      map[string]string
	imageIDs map[string]string // image ref -> id, from preflight
	janitor  *Janitor
	budget   *applyBudget // the apply-wide spend and max_usd
	denials  egressDenials
	secrets  runSecrets // values the engine registered, masked like credentials
	// envWarnings are preflight's findings about the environment, reported with the run's start.
	envWarnings []string

	mu      sync.Mutex                      // guards outputs, imageIDs after preflight
	outputs map[string]map[string]cty.Value // finished nodes' outputs, for re-planning
	planMu  sync.Mutex                      // serialises re-plans
	// attempts is each running node's current attempt (under mu), for what the engine reports by node.
	attempts map[string]int
	// nodeBudgets is each running node's budget of its current attempt (under mu), which the proxy's figures
	// reach through brokerRequest.
	nodeBudgets map[string]*nodeBudget
	slots       *slotQueue // the Parallelism slots of running nodes (slots.go)
}

func (a *applier) warn(node, msg string) {
	a.hook.Warning(WarningEvent{RunID: a.runID, Node: node, Message: a.maskAll(msg, a.nodeCredentials(node)), Time: time.Now()})
}

// newRunID is sortable by start time and unique: UTC time plus random bits.
func newRunID(t time.Time) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return t.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

// runGraph runs every node in dependency order, at most Parallelism at once, and returns each node's result.
func (a *applier) runGraph(ctx context.Context) map[string]*ledger.NodeResult {
	nodes := a.opts.Plan.Nodes
	inPlan := map[string]bool{}
	for _, np := range nodes {
		inPlan[np.Name] = true
	}
	results := a.reuseNodes()
	started := map[string]bool{}
	type done struct {
		name string
		res  *ledger.NodeResult
	}
	finished := make(chan done)
	running := 0

	finish := func(np *planner.NodePlan, status, reason string) {
		r := a.baseResult(np)
		r.Status, r.Reason, r.Ended = status, reason, time.Now()
		if err := a.ledger.RecordNode(r); err != nil {
			a.warn(np.Name, err.Error())
		}
		results[np.Name] = r
		a.hook.NodeDone(*r)
	}

	for len(results) < len(nodes) {
		progressed := false
		for _, np := range nodes {
			if results[np.Name] != nil || started[np.Name] {
				continue
			}
			if ctx.Err() != nil {
				finish(np, ledger.StatusCancelled, "not started: the apply was cancelled")
				progressed = true
				continue
			}
			if d, over := a.budget.exceeded(); over {
				finish(np, ledger.StatusSkipped, applyStopReason(d))
				progressed = true
				continue
			}
			if a.engineLost() != nil {
				finish(np, ledger.StatusSkipped, notStartedEngineLost)
				progressed = true
				continue
			}
			ready, blocked := true, ""
			for _, dep := range np.DependsOn {
				if !inPlan[dep] {
					blocked = fmt.Sprintf("dependency %q is not part of this plan", dep)
					break
				}
				r := results[dep]
				if r == nil {
					ready = false
					continue
				}
				if !ledger.NodeSucceeded(r.Status) {
					blocked = fmt.Sprintf("dependency %q %s", dep, describeStatus(r.Status))
					break
				}
			}
			if blocked != "" {
				finish(np, ledger.StatusSkipped, blocked)
				progressed = true
				continue
			}
			if !ready || running >= a.opts.Parallelism+lookahead {
				continue
			}
			started[np.Name] = true
			a.slots.enqueue(np.Name)
			running++
			progressed = true
			go func(np *planner.NodePlan) {
				finished <- done{np.Name, a.runNode(ctx, np)}
			}(np)
		}
		if len(results) == len(nodes) {
			break
		}
		if running == 0 {
			if progressed {
				continue
			}
			// Nothing runs and nothing can start: only a cycle does that, which the planner refuses.
			for _, np := range nodes {
				if results[np.Name] == nil {
					finish(np, ledger.StatusSkipped, "its dependencies can never finish (a dependency cycle)")
				}
			}
			break
		}
		d := <-finished
		running--
		results[d.name] = d.res
		a.mu.Lock()
		a.outputs[d.name] = nodeOutputs(d.res)
		a.mu.Unlock()
	}
	return results
}

func describeStatus(status string) string {
	switch status {
	case ledger.StatusFailed:
		return "failed"
	case ledger.StatusTimedOut:
		return "timed out"
	case ledger.StatusCancelled:
		return "was cancelled"
	case ledger.StatusHeld:
		return "is held for a human (no usable verdict)"
	case ledger.StatusChangesRequested:
		return "requested changes"
	case ledger.StatusRejected:
		return "rejected the change"
	case ledger.StatusSkipped:
		return "was skipped"
	case ledger.StatusBudgetExceeded:
		return "exceeded its budget"
	case ledger.StatusInterrupted:
		return "was interrupted"
	default:
		return "did not succeed (" + status + ")"
	}
}

// nodeOutputs are the values node.<name>.<output> takes for downstream nodes.
func nodeOutputs(r *ledger.NodeResult) map[string]cty.Value {
	commit := r.Commit
	if commit == "" {
		commit = r.BaseCommit
	}
	verdict := ""
	if r.Verdict != nil {
		verdict = r.Verdict.Verdict
	}
	return map[string]cty.Value{
		"commit":     cty.StringVal(commit),
		"branch":     cty.StringVal(r.Branch),
		"status":     cty.StringVal(r.Status),
		"verdict":    cty.StringVal(verdict),
		"session_id": cty.StringVal(r.Totals.SessionID),
	}
}

func (a *applier) baseResult(np *planner.NodePlan) *ledger.NodeResult {
	r := &ledger.NodeResult{
		RunID: a.runID, Node: np.Name, Runner: np.Runner, Protocol: np.Protocol, Role: np.Role,
		Image: np.Image, Model: np.Model, PromptSHA256: np.Prompt.SHA256, Slug: np.Slug,
	}
	if r.Role == "" {
		r.Role = config.RoleWorker
	}
	if np.Container != nil && r.Image == "" {
		r.Image = np.Container.Image
	}
	a.mu.Lock()
	r.ImageID = a.imageIDs[r.Image]
	a.mu.Unlock()
	return r
}

// replan renders a downstream node again with its dependencies' outputs known, so its argv and prompt are the
// ones actually used.
func (a *applier) replan(np *planner.NodePlan) (*planner.NodePlan, error) {
	cfg := a.opts.Config
	if cfg == nil || len(np.DependsOn) == 0 {
		return np, nil
	}
	a.mu.Lock()
	outputs := make(map[string]map[string]cty.Value, len(a.outputs))
	for k, v := range a.outputs {
		outputs[k] = v
	}
	a.mu.Unlock()
	in := planner.Inputs{Vars: a.opts.Vars, Outputs: outputs, Targets: []string{np.Name}}
	if cfg.Dir != "" {
		in.FS = config.DirFS(cfg.Dir)
	}
	a.planMu.Lock()
	p, diags := planner.Build(cfg, in)
	a.planMu.Unlock()
	if diags.HasErrors() || (p != nil && p.Diagnostics.HasErrors()) {
		all := append(hcl.Diagnostics{}, diags...)
		if p != nil {
			all = append(all, p.Diagnostics...)
		}
		return nil, fmt.Errorf("re-planning with the upstream outputs failed: %s", config.DiagnosticsText(all))
	}
	if p != nil {
		for _, n := range p.Nodes {
			if n.Name == np.Name {
				return n, nil
			}
		}
	}
	return nil, fmt.Errorf("re-planning with the upstream outputs did not produce node %q", np.Name)
}

// syncHook delivers each event to every hook of the options in order, serialises the calls and recovers a hook's
// panic: the first one cancels the apply and is raised again by repanic when Apply returns, after its cleanup.
type syncHook struct {
	mu     sync.Mutex
	hooks  []Hook
	cancel context.CancelFunc
	panic  *hookPanic
}

// hookPanic is what Apply panics with when a hook panicked: the hook's value and the stack where it panicked.
type hookPanic struct {
	Value any
	Stack []byte
}

func (p *hookPanic) Error() string {
	return fmt.Sprintf("a kewplan hook panicked (the apply was cancelled and cleaned up first): %v\n\n%s", p.Value, p.Stack)
}

func (s *syncHook) call(fn func(Hook)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.hooks {
		s.callOne(h, fn)
	}
}

func (s *syncHook) callOne(h Hook, fn func(Hook)) {
	defer func() {
		if r := recover(); r != nil && s.panic == nil {
			s.panic = &hookPanic{Value: r, Stack: debug.Stack()}
			if s.cancel != nil {
				s.cancel()
			}
		}
	}()
	fn(h)
}

func (s *syncHook) repanic() {
	s.mu.Lock()
	p := s.panic
	s.mu.Unlock()
	if p != nil {
		panic(p)
	}
}

func (s *syncHook) ApplyStart(e ApplyStartEvent)       { s.call(func(h Hook) { h.ApplyStart(e) }) }
func (s *syncHook) NodeStart(e NodeStartEvent)         { s.call(func(h Hook) { h.NodeStart(e) }) }
func (s *syncHook) NodeProgress(e NodeProgressEvent)   { s.call(func(h Hook) { h.NodeProgress(e) }) }
func (s *syncHook) NodeDone(e ledger.NodeResult)       { s.call(func(h Hook) { h.NodeDone(e) }) }
func (s *syncHook) NodeRetry(e NodeRetryEvent)         { s.call(func(h Hook) { h.NodeRetry(e) }) }
func (s *syncHook) Warning(e WarningEvent)             { s.call(func(h Hook) { h.Warning(e) }) }
func (s *syncHook) ApplyDone(e ApplySummary)           { s.call(func(h Hook) { h.ApplyDone(e) }) }
func (s *syncHook) EgressDenied(e ledger.EgressDenial) { s.call(func(h Hook) { h.EgressDenied(e) }) }

func (s *syncHook) BudgetWarning(e BudgetWarningEvent) { s.call(func(h Hook) { h.BudgetWarning(e) }) }

// nodePhase tells every PhaseHook of a step of an attempt.
func (s *syncHook) nodePhase(e NodePhaseEvent) {
	s.call(func(h Hook) {
		if ph, ok := h.(PhaseHook); ok {
			ph.NodePhase(e)
		}
	})
}

// runSecret tells every SecretHook of a value registered as the run's secret.
func (s *syncHook) runSecret(v string) {
	if s == nil {
		return
	}
	s.call(func(h Hook) {
		if sh, ok := h.(SecretHook); ok {
			sh.RunSecret(v)
		}
	})
}

// Janitor remembers what a running apply must clean up, so that a second interrupt can make one last, bounded
// attempt (the engine kills and removes what still runs and deletes the prompt files, the run is marked
// cancelled) before the process exits without waiting for the nodes to wind down.
type Janitor struct {
	mu       sync.Mutex
	engine   adapter.Engine
	ledger   *ledger.Ledger
	runID    string
	finished bool
}

// NewJanitor returns an empty janitor; pass it in ApplyOptions.
func NewJanitor() *Janitor { return &Janitor{} }

func (j *Janitor) bind(e adapter.Engine, l *ledger.Ledger, runID string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.engine, j.ledger, j.runID = e, l, runID
}

func (j *Janitor) done() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.finished = true
}

// Now makes the last cleanup attempt, waiting at most timeout, and returns what failed.
func (j *Janitor) Now(timeout time.Duration) []error {
	j.mu.Lock()
	eng, led, runID, finished := j.engine, j.ledger, j.runID, j.finished
	j.mu.Unlock()
	if finished {
		return nil
	}
	var errs []error
	if eng != nil {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		errs = append(errs, eng.Abort(ctx)...)
		cancel()
	}
	if led != nil && runID != "" {
		if err := led.FinishRun(runID, ledger.RunCancelled, time.Now()); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}
