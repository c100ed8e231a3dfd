package executor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/executor/engine"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/planner"
)

// DefaultParallelism is how many nodes run at once when ApplyOptions.Parallelism is 0.
const DefaultParallelism = 4

// DefaultTimeout applies to a node without a timeout.
const DefaultTimeout = 60 * time.Minute

// DefaultStateDir is the state directory's name beside the configuration.
const DefaultStateDir = ".kewplan"

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
	// ProxyBinary is the static kewplan binary whose image runs the egress proxy; "" means the running executable
	// (tests, whose executable is not kewplan, build one).
	ProxyBinary string
	// Kubernetes, when set, runs every node as a Job on that cluster (kubernetes.go) instead of a container on the
	// Docker engine; the graph, budgets, retries, ledger and events are the same.
	Kubernetes *KubernetesOptions
	// EgressAllowPrivateAddresses lets the proxy connect to private addresses (a test's stub server); for tests
	// only: a configuration cannot set it.
	EgressAllowPrivateAddresses bool
}

// DefaultMaxOutputBytes is the output budget of one agent: far above any real stream-json session, far below a
// disk.
const DefaultMaxOutputBytes = 1 << 30

// PreflightError lists every reason apply refused to start; nothing ran.
type PreflightError struct {
	Problems []string
}

func (e *PreflightError) Error() string {
	if len(e.Problems) == 1 {
		return "preflight: " + e.Problems[0]
	}
	return fmt.Sprintf("preflight found %d problems:\n  - %s", len(e.Problems), strings.Join(e.Problems, "\n  - "))
}

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
	stateDir, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return nil, fmt.Errorf("state directory %s: %w", opts.StateDir, err)
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	a := &applier{
		opts:     opts,
		hook:     sh,
		stateDir: stateDir,
		env:      engine.EnvMap(opts.Environ),
		pid:      os.Getpid(),
		imageIDs: map[string]string{},
		outputs:  map[string]map[string]cty.Value{},
		janitor:  opts.Janitor,
		budget:   newApplyBudget(opts.Plan),
		slots:    newSlotQueue(opts.Parallelism),
		k8s:      newK8sState(opts.Kubernetes),
	}
	if a.janitor == nil {
		a.janitor = NewJanitor()
	}

	lock, lockErr := ledger.LockStateDir(stateDir)
	if lock != nil {
		defer lock.Unlock()
	}
	if err := a.preflight(ctx, lockErr); err != nil {
		return nil, err
	}
	if a.engine != nil {
		defer a.engine.Close()
	}

	a.ledger, err = ledger.Open(filepath.Join(stateDir, ledger.Filename))
	if err != nil {
		return nil, err
	}
	defer a.ledger.Close()
	a.sweep(ctx)

	a.runID = newRunID(time.Now())
	a.janitor.bind(a.engine, a.ledger, a.runID)
	if a.k8s != nil {
		a.janitor.bindKubernetes(a.k8sDeleteRun)
	} else if err := a.startNetworking(ctx); err != nil {
		return nil, err
	}
	defer a.stopEgress()
	started := time.Now()
	run := ledger.RunRecord{ID: a.runID, StartedAt: started, ConfigDigest: opts.Plan.ConfigDigest, KewplanVersion: opts.KewplanVersion, PID: a.pid}
	if opts.Resume != nil {
		run.ResumedFrom = opts.Resume.FromRun
	}
	if err := a.ledger.StartRun(run); err != nil {
		return nil, err
	}
	names := make([]string, len(opts.Plan.Nodes))
	for i, np := range opts.Plan.Nodes {
		names[i] = np.Name
	}
	a.hook.ApplyStart(ApplyStartEvent{RunID: a.runID, StateDir: stateDir, ConfigDigest: opts.Plan.ConfigDigest, Nodes: names, Parallelism: opts.Parallelism, Time: started,
		Warnings: a.envWarnings})

	results := a.runGraph(ctx)
	a.stopEgress()
	if a.k8s != nil {
		a.k8sEnd()
	}

	sum := a.summarize(ctx, started, results)
	a.egressSummary(&sum)
	if err := a.ledger.FinishRun(a.runID, sum.Status, sum.Ended); err != nil {
		a.warn("", fmt.Sprintf("could not record the end of run %s: %v", a.runID, err))
	}
	a.janitor.done()
	a.hook.ApplyDone(sum)
	return &sum, nil
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
	sum := ApplySummary{RunID: a.runID, Started: started, Ended: time.Now(), StateDir: a.stateDir, Status: ledger.RunSucceeded}
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
	engine   *engine.Engine
	ledger   *ledger.Ledger
	stateDir string
	runID    string
	pid      int
	env      map[string]string
	imageIDs map[string]string // image ref -> id, from preflight
	janitor  *Janitor
	budget   *applyBudget // the apply-wide spend and max_usd
	egress   *egressState // the apply's egress proxy; nil when no node is proxied
	k8s      *k8sState    // the Kubernetes engine; nil on Docker
	// envWarnings are preflight's findings about the environment, reported with the run's start.
	envWarnings []string

	mu      sync.Mutex                      // guards outputs, imageIDs after preflight
	outputs map[string]map[string]cty.Value // finished nodes' outputs, for re-planning
	planMu  sync.Mutex                      // serialises re-plans
	slots   *slotQueue                      // the Parallelism slots of running nodes (slots.go)
}

func (a *applier) warn(node, msg string) {
	a.hook.Warning(WarningEvent{RunID: a.runID, Node: node, Message: a.maskString(msg, a.nodeCredentials(node)), Time: time.Now()})
}

// nodePlanProblem is what makes a node unrunnable on any engine, read from its plan: errors, or a runner that
// forwards no credential. "" when there is none.
func nodePlanProblem(np *planner.NodePlan) string {
	if np.Errors || (np.Container == nil && len(np.Unknown) == 0) {
		return fmt.Sprintf("node %q has errors in the plan; run `kewplan plan` to see them", np.Name)
	}
	if len(np.Credentials) == 0 {
		return fmt.Sprintf("node %q: runner %q forwards no credential, so the agent could not authenticate; declare the runner's credentials", np.Name, np.Runner)
	}
	return ""
}

// preflight checks everything a node needs before any container starts, collecting every problem so one apply
// attempt tells the user all that is missing.
func (a *applier) preflight(ctx context.Context, lockErr error) error {
	if a.k8s != nil {
		return a.k8sPreflight(ctx, lockErr)
	}
	var problems []string
	if lockErr != nil {
		problems = append(problems, lockErr.Error())
	}
	if _, err := exec.LookPath("git"); err != nil {
		problems = append(problems, "git is not installed or not on PATH: kewplan clones each node's repository with the system git; install git")
	}
	for _, np := range a.opts.Plan.Nodes {
		if p := nodePlanProblem(np); p != "" {
			problems = append(problems, p)
			continue
		}
		set := false
		for _, name := range np.Credentials {
			if a.env[name] != "" {
				set = true
				break
			}
		}
		if !set {
			problems = append(problems, fmt.Sprintf("node %q: none of runner %q's credentials is set in kewplan's environment (%s); export one of them, for example `export %s=…`",
				np.Name, np.Runner, strings.Join(np.Credentials, ", "), np.Credentials[0]))
		}
	}

	eng, err := engine.Connect(ctx, a.opts.Environ)
	if err != nil {
		problems = append(problems, err.Error())
	} else {
		a.engine = eng
		if versions, err := eng.ComponentVersions(ctx); err == nil {
			a.envWarnings = append(a.envWarnings, versionFloorWarnings(versions)...)
		}
		problems = append(problems, a.runtimePreflight(ctx, eng)...)
		images := map[string][]string{}
		networks := map[string][]string{}
		for _, np := range a.opts.Plan.Nodes {
			// A node whose values depend on another node's outputs has no container until apply re-plans it;
			// its image and network are known all the same.
			image, netName := np.Image, ""
			if np.Container != nil {
				image, netName = np.Container.Image, np.Container.Network
			} else if a.opts.Config != nil && a.opts.Config.Sandbox != nil {
				netName = a.opts.Config.Sandbox.AllowlistNetwork
			}
			if image != "" {
				images[image] = append(images[image], np.Name)
			}
			if np.Network == config.NetworkAllowlist && netName != "" {
				networks[netName] = append(networks[netName], np.Name)
			}
		}
		for _, ref := range slices.Sorted(maps.Keys(images)) {
			info, err := eng.InspectImage(ctx, ref)
			if err != nil {
				problems = append(problems, fmt.Sprintf("node %s: %v", quoteList(images[ref]), err))
				continue
			}
			if problem := rootImageProblem(info); problem != "" {
				problems = append(problems, fmt.Sprintf("node %s: %s", quoteList(images[ref]), problem))
				continue
			}
			a.imageIDs[ref] = info.ID
		}
		for _, name := range slices.Sorted(maps.Keys(networks)) {
			info, err := eng.InspectNetwork(ctx, name)
			if errors.Is(err, engine.ErrNotFound) {
				problems = append(problems, fmt.Sprintf("node %s: the allowlist network %q does not exist; kewplan fails closed and never falls back to another network: create it with `%s` and attach your egress proxy to it",
					quoteList(networks[name]), name, allowlistNetworkCommand(name)))
				continue
			}
			if err != nil {
				problems = append(problems, err.Error())
				continue
			}
			if !info.Internal {
				// A network that merely has the allowlist's name is no allowlist: its containers reach any host.
				problems = append(problems, fmt.Sprintf("node %s: the allowlist network %q is not --internal, so containers on it could reach the internet directly instead of only through your egress proxy; kewplan fails closed: recreate it with `docker network rm %s && %s` and attach your egress proxy to it",
					quoteList(networks[name]), name, name, allowlistNetworkCommand(name)))
				continue
			}
			if info.Driver == "bridge" && info.Options[inhibitIPv4] != "true" {
				// An --internal bridge still gives the host an address on it, and the host's INPUT chain is not
				// Docker's: an agent reaches every service this host listens on all interfaces.
				a.envWarnings = append(a.envWarnings, fmt.Sprintf("the allowlist network %q gives this host an address on its bridge, so agents can reach any service the host listens on (all interfaces); recreate it without one: `docker network rm %s && %s`",
					name, name, allowlistNetworkCommand(name)))
			}
		}
	}
	if len(problems) > 0 {
		if a.engine != nil {
			a.engine.Close()
			a.engine = nil
		}
		return &PreflightError{Problems: problems}
	}
	return nil
}

// versionFloorWarnings names each engine component older than the release that fixes a container-escape or
// sandbox-egress CVE (security notes §6 C12). It warns rather than refuses: a distribution may have backported the
// fix without changing the upstream version number.
func versionFloorWarnings(versions map[string]string) []string {
	var out []string
	if v, ok := parseVersion(versions["Engine"]); ok {
		fixed := v[0] >= 26 || v[0] == 25 && !versionLess(v, [3]int{25, 0, 4}) || v[0] == 23 && !versionLess(v, [3]int{23, 0, 11})
		if !fixed {
			out = append(out, fmt.Sprintf("the Docker Engine is %s, older than the releases that fix CVE-2024-29018 (DNS exfiltration from --internal networks: 23.0.11, 25.0.4, 26.0.0); upgrade it, unless your distribution backported the fix", versions["Engine"]))
		}
	}
	if v, ok := parseVersion(versions["runc"]); ok {
		switch {
		case versionLess(v, [3]int{1, 1, 12}):
			out = append(out, fmt.Sprintf("runc is %s, older than 1.1.12, which fixes CVE-2024-21626 (a container process reaching the host filesystem), and than 1.2.8, which fixes CVE-2025-31133, CVE-2025-52565 and CVE-2025-52881; upgrade it, unless your distribution backported the fixes", versions["runc"]))
		case versionLess(v, [3]int{1, 2, 8}) || v[0] == 1 && v[1] == 3 && versionLess(v, [3]int{1, 3, 3}):
			out = append(out, fmt.Sprintf("runc is %s, older than the releases that fix CVE-2025-31133, CVE-2025-52565 and CVE-2025-52881 (1.2.8, 1.3.3); upgrade it, unless your distribution backported the fixes", versions["runc"]))
		}
	}
	return out
}

// parseVersion reads the leading MAJOR.MINOR.PATCH of a version such as "20.10.24+dfsg1" or "v1.1.5".
func parseVersion(s string) ([3]int, bool) {
	var v [3]int
	s = strings.TrimPrefix(s, "v")
	for i := 0; i < 3; i++ {
		n, rest := 0, 0
		for rest < len(s) && s[rest] >= '0' && s[rest] <= '9' {
			n = n*10 + int(s[rest]-'0')
			rest++
		}
		if rest == 0 {
			return v, false
		}
		v[i] = n
		s = s[rest:]
		if i < 2 {
			if !strings.HasPrefix(s, ".") {
				return v, i >= 1
			}
			s = s[1:]
		}
	}
	return v, true
}

func versionLess(a, b [3]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// inhibitIPv4 is the bridge driver option that leaves the host without an address on the network.
const inhibitIPv4 = "com.docker.network.bridge.inhibit_ipv4"

// allowlistNetworkCommand is how to create an allowlist network that is closed on both sides: no route out
// (--internal) and no host address on its bridge.
func allowlistNetworkCommand(name string) string {
	return fmt.Sprintf("docker network create --internal %s -o %s=true", name, inhibitIPv4)
}

// rootImageProblem refuses an image whose configured user is root: kewplan never sets the container's user, so the
// image's USER is who the agent runs as, and the contract requires uid 1001 (the HOME tmpfs is pinned to it).
func rootImageProblem(info *engine.ImageInfo) string {
	user, _, _ := strings.Cut(info.User, ":")
	if user != "" && user != "0" && user != "root" {
		return ""
	}
	shown := fmt.Sprintf("its USER is %q", info.User)
	if info.User == "" {
		shown = "it sets no USER"
	}
	return fmt.Sprintf("image %q would run the agent as root (%s); kewplan runs agents only as a non-root user: end its Dockerfile with `USER %d` (the HOME tmpfs is pinned to uid %d)",
		info.Ref, shown, planner.AgentUID, planner.AgentUID)
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
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
		Image: np.Image, Model: np.Model, PromptSHA256: np.Prompt.SHA256,
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

// Janitor remembers what a running apply must clean up, so that a second interrupt can make one last, bounded
// attempt (kill and remove the containers, delete the prompt files, mark the run cancelled) before the process
// exits without waiting for the nodes to wind down.
type Janitor struct {
	mu         sync.Mutex
	engine     *engine.Engine
	ledger     *ledger.Ledger
	runID      string
	containers map[string]bool
	prompts    map[*promptFile]bool
	finished   bool
	// deleteRun deletes every Kubernetes object of the run (nil on Docker).
	deleteRun func(context.Context) error
}

// NewJanitor returns an empty janitor; pass it in ApplyOptions.
func NewJanitor() *Janitor {
	return &Janitor{containers: map[string]bool{}, prompts: map[*promptFile]bool{}}
}

func (j *Janitor) bind(e *engine.Engine, l *ledger.Ledger, runID string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.engine, j.ledger, j.runID = e, l, runID
}

func (j *Janitor) bindKubernetes(deleteRun func(context.Context) error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.deleteRun = deleteRun
}

func (j *Janitor) done() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.finished = true
}

func (j *Janitor) addContainer(id string)   { j.mu.Lock(); j.containers[id] = true; j.mu.Unlock() }
func (j *Janitor) dropContainer(id string)  { j.mu.Lock(); delete(j.containers, id); j.mu.Unlock() }
func (j *Janitor) addPrompt(p *promptFile)  { j.mu.Lock(); j.prompts[p] = true; j.mu.Unlock() }
func (j *Janitor) dropPrompt(p *promptFile) { j.mu.Lock(); delete(j.prompts, p); j.mu.Unlock() }
func (j *Janitor) snapshot() ([]string, []*promptFile, *engine.Engine, *ledger.Ledger, string, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	ids := make([]string, 0, len(j.containers))
	for id := range j.containers {
		ids = append(ids, id)
	}
	ps := make([]*promptFile, 0, len(j.prompts))
	for p := range j.prompts {
		ps = append(ps, p)
	}
	return ids, ps, j.engine, j.ledger, j.runID, j.finished
}

// Now makes the last cleanup attempt, waiting at most timeout, and returns what failed.
func (j *Janitor) Now(timeout time.Duration) []error {
	ids, prompts, eng, led, runID, finished := j.snapshot()
	if finished {
		return nil
	}
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, p := range prompts {
		if err := p.Remove(); err != nil {
			errs = append(errs, err)
		}
	}
	if eng != nil {
		for _, id := range ids {
			wg.Add(1)
			go func(id string) {
				defer wg.Done()
				if err := eng.ForceRemove(id); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}(id)
		}
	}
	j.mu.Lock()
	deleteRun := j.deleteRun
	j.mu.Unlock()
	if deleteRun != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			if err := deleteRun(ctx); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	doneCh := make(chan struct{})
	go func() { wg.Wait(); close(doneCh) }()
	select {
	case <-doneCh:
	case <-time.After(timeout):
		mu.Lock()
		errs = append(errs, fmt.Errorf("cleanup did not finish within %s; check `docker ps -a --filter label=%s=%s`", timeout, planner.LabelRun, runID))
		mu.Unlock()
	}
	if led != nil && runID != "" {
		if err := led.FinishRun(runID, ledger.RunCancelled, time.Now()); err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	}
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(errs)
}
