// Package kubernetes is the apply loop's Kubernetes engine (adapter.Engine): each attempt of a node is rendered by
// k8srender, with its upstream outputs, and run as a Job through k8sengine that clones, runs the agent and pushes
// or prints the verdict inside its pod. kewplan follows the agent step's log into the loop's stream (meter,
// transcript, budgets), reads the outcome from the Job, its pod and its events, and deletes the node's objects
// (foreground) when the attempt ends, and every object of the run when the apply ends or is cancelled. Nothing
// of a node touches the host but its logs and the ledger.
package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/egress"
	"github.com/kewplan/kewplan/executor/adapter"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/verdict"
	"github.com/kewplan/kewplan/internal/brokerplan"
	"github.com/kewplan/kewplan/k8sengine"
	"github.com/kewplan/kewplan/k8srender"
	"github.com/kewplan/kewplan/planner"
)

// Options configure the Kubernetes engine of an apply.
type Options struct {
	// Engine is the configuration's engine "kubernetes" block: namespace, Secrets, runtime class, proxy.
	Engine *config.KubernetesEngine
	// Cluster is the namespace the Jobs go to (k8sengine.New, or k8stest.FakeAPI over a fake clientset in tests).
	Cluster *k8sengine.Cluster
	// DeadlineGrace is how long past a node's timeout (the Job's activeDeadlineSeconds) kewplan waits for the
	// cluster to end the Job before it deletes the Job itself; 0 means 30s.
	DeadlineGrace time.Duration
	// ProxyReadyTimeout bounds the wait for kewplan's egress proxy Deployment to have a ready pod before the first
	// node's Job; 0 means 3 minutes (a first pull of the proxy image included).
	ProxyReadyTimeout time.Duration
}

// Engine runs an apply's nodes as Jobs on a cluster.
type Engine struct {
	opts       Options
	run        *adapter.Run
	sharedOnce sync.Once
	sharedErr  error
	// proxyAddress is the cluster IP of the proxy's Service, read once the run's shared objects are applied; ""
	// when no node goes through a proxy.
	proxyAddress string
	watch        *k8sengine.RunWatch // from Start
	// credentialKeys are the credentials Secret's keys, read by Preflight; upstreamCA is
	// sandbox.egress.upstream_ca_file's content, read with the shared objects.
	credentialKeys []string
	upstreamCA     string
	// proxy is kewplan's egress proxy (proxy_image) once the shared objects are applied; nil without one.
	proxy atomic.Pointer[proxyState]
}

var (
	_ adapter.Engine    = (*Engine)(nil)
	_ adapter.NodeEnder = (*Engine)(nil)
)

// New returns the Kubernetes engine for one apply.
func New(o Options) *Engine {
	e := &Engine{opts: o}
	if e.opts.DeadlineGrace <= 0 {
		e.opts.DeadlineGrace = 30 * time.Second
	}
	if e.opts.ProxyReadyTimeout <= 0 {
		e.opts.ProxyReadyTimeout = 3 * time.Minute
	}
	return e
}

// Preflight checks the cluster: the API answers, the namespace, its Pod Security level, the Secrets and their
// keys, the runtime class. Docker's image and network checks do not apply: the images are pulled by the cluster,
// the network is the NetworkPolicy.
func (e *Engine) Preflight(ctx context.Context, run *adapter.Run) (problems, warnings []string) {
	e.run = run
	if e.opts.Engine == nil || e.opts.Cluster == nil {
		return []string{`apply on Kubernetes needs the configuration's engine "kubernetes" block and a cluster to connect to`}, nil
	}
	// The credentials: like Docker's check of kewplan's environment, each node's runner needs at least one of its
	// names as a key of the credentials Secret (a runner may accept either of two); the others stay unset.
	rep, err := e.opts.Cluster.Preflight(ctx, e.opts.Engine, nil)
	if err != nil {
		return []string{err.Error()}, nil
	}
	problems = append(problems, rep.Errors...)
	problems = append(problems, e.credentialProblems(ctx)...)
	if ke := e.opts.Engine; ke.ProxyImage == "" && proxied(run.Plan) {
		// The operator's proxy: its Service's cluster IP is what the proxied pods, which have no DNS, reach.
		if _, err := e.opts.Cluster.ServiceClusterIP(ctx, ke.ProxyNamespace, ke.ProxyService); err != nil {
			problems = append(problems, err.Error())
		}
	}
	return problems, rep.Warnings
}

// Start watches the run's Jobs, pods and events: every node's wait reads those caches, so the API server is not
// polled per node. The run's shared objects are applied with the first node's Job, which needs them.
func (e *Engine) Start(ctx context.Context, run *adapter.Run) error {
	w, err := e.opts.Cluster.WatchRun(ctx, run.ID)
	if err != nil {
		return err
	}
	e.watch = w
	return nil
}

// Close stops the run's watches.
func (e *Engine) Close() error {
	e.stopProxyLog()
	if e.watch != nil {
		e.watch.Stop()
	}
	return nil
}

// credentialProblems names each node none of whose runner's credentials is a key of the credentials Secret.
func (e *Engine) credentialProblems(ctx context.Context) []string {
	ke := e.opts.Engine
	keys, found, err := e.opts.Cluster.SecretKeys(ctx, ke.CredentialsSecret)
	if err != nil {
		return []string{err.Error()}
	}
	if !found {
		return nil // Preflight reported the missing Secret
	}
	e.credentialKeys = append([]string{}, keys...) // not nil: a Secret without keys holds none, nil would mean all
	var problems []string
	for _, np := range e.run.Plan.Nodes {
		if len(np.Credentials) == 0 || slices.ContainsFunc(np.Credentials, func(c string) bool { return slices.Contains(keys, c) }) {
			continue
		}
		problems = append(problems, fmt.Sprintf("node %q: none of runner %q's credentials is a key of the Secret %q (%s); add one, for example `kubectl -n %s create secret generic %s --from-literal=%s=…` (or patch the existing Secret)",
			np.Name, np.Runner, ke.CredentialsSecret, strings.Join(np.Credentials, ", "), ke.Namespace, ke.CredentialsSecret, np.Credentials[0]))
	}
	return problems
}

// Sweep deletes the objects of runs this state directory started and that are dead: a run this ledger records
// is dead once this apply holds the state lock. Objects of runs this ledger does not know belong to another
// state directory or user, and are left alone, as on Docker.
func (e *Engine) Sweep(ctx context.Context, run *adapter.Run) {
	live := func(id string) bool { return id == run.ID || !run.Known(id) }
	swept, err := e.opts.Cluster.Sweep(ctx, live)
	if err != nil {
		run.Warn("", fmt.Sprintf("could not remove the Kubernetes objects left by a dead run: %v", err))
	}
	for _, s := range swept {
		run.Warn("", "removed "+s+" left by a run that ended without cleaning up (kewplan was killed?)")
	}
}

// End deletes every object of the run (foreground), with a context of its own: it runs after a cancellation
// too, so that no Job, pod or Secret is left behind.
func (e *Engine) End(_ context.Context, run *adapter.Run) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := e.opts.Cluster.DeleteRun(ctx, run.ID); err != nil {
		run.Warn("", fmt.Sprintf("%v; delete what is left with `kubectl delete jobs,pods,secrets,networkpolicies -n %s -l %s=%s`",
			err, e.opts.Cluster.Namespace, k8srender.LabelRun, run.ID))
	}
	e.stopProxyLog()
}

// Abort is the last attempt on a second interrupt: every object of the run is deleted.
func (e *Engine) Abort(ctx context.Context) []error {
	if e.run == nil {
		return nil
	}
	if err := e.opts.Cluster.DeleteRun(ctx, e.run.ID); err != nil {
		return []error{err}
	}
	return nil
}

// nameSuffix names a node's objects in this run and attempt: the run id, lower-cased (an object name is a DNS
// label), and the attempt from the second on, so a retry is a fresh Job.
func (e *Engine) nameSuffix(attempt int) string {
	s := strings.ToLower(e.run.ID)
	if attempt > 1 {
		s += fmt.Sprintf("-a%d", attempt)
	}
	return s
}

// render renders one re-planned node for this run and attempt.
func (e *Engine) render(np *planner.NodePlan, attempt int) (*k8srender.NodeObjects, error) {
	p := &planner.Plan{Nodes: []*planner.NodePlan{np}, ConfigDigest: e.run.Plan.ConfigDigest}
	m, diags := k8srender.Render(p, k8srender.Options{Engine: e.opts.Engine, RunID: e.run.ID, NameSuffix: e.nameSuffix(attempt),
		ProxyAddress: e.proxyAddress, CredentialKeys: e.credentialKeys, UpstreamCAPEM: e.upstreamCA})
	if diags.HasErrors() || m == nil || len(m.Nodes) != 1 {
		return nil, fmt.Errorf("render the node's Kubernetes objects: %s", config.DiagnosticsText(diags))
	}
	return m.Nodes[0], nil
}

// shared applies the run's shared objects (the egress NetworkPolicy, the proxy's objects) once, before the
// first node's Job; every node fails with the same reason when that did not work. They are rendered from the
// whole plan, not from the first node's: the NetworkPolicy is open only when every node's network is.
func (e *Engine) shared(ctx context.Context) error {
	e.sharedOnce.Do(func() {
		// kewplan's egress proxy (proxy_image) gets a fresh secret per user and run; render's derived ones are
		// only for manifests that must not change between renders.
		secrets := map[string]string{}
		for _, user := range k8srender.ProxyUsers(e.opts.Engine, e.run.Plan) {
			secret, err := egress.NewSecret()
			if err != nil {
				e.sharedErr = fmt.Errorf("egress proxy secret: %w", err)
				return
			}
			secrets[user] = secret
			e.run.AddSecret(secret, "proxy secret")
		}
		// A brokered node's agent holds placeholders, fresh for every apply; the real values stay in the proxy's pod.
		for _, kn := range k8srender.BrokerPlaceholderKeys(e.opts.Engine, e.run.Plan, e.credentialKeys) {
			ph, err := egress.NewPlaceholder()
			if err != nil {
				e.sharedErr = fmt.Errorf("egress proxy placeholder: %w", err)
				return
			}
			secrets[kn[0]] = ph
			e.run.AddSecret(ph, kn[1]) // masked as the credential it stands for
		}
		// The proxy's control endpoint, when it brokers a node: apply ends the node and starts its retries there.
		var ps *proxyState
		if brokers := k8srender.BrokeredUsers(e.opts.Engine, e.run.Plan, e.credentialKeys); len(brokers) > 0 {
			control, err := egress.NewSecret()
			if err != nil {
				e.sharedErr = fmt.Errorf("egress proxy control secret: %w", err)
				return
			}
			secrets[k8srender.ProxyControlKey] = control
			e.run.AddSecret(control, "proxy secret")
			ps = &proxyState{control: control, brokers: brokers}
		}
		if e.upstreamCA, e.sharedErr = brokerplan.UpstreamCA(e.run.Config); e.sharedErr != nil {
			return
		}
		e.sharedErr = e.applyShared(ctx, secrets, ps)
	})
	return e.sharedErr
}

// applyShared applies the run's shared objects and reads the proxy Service's cluster IP, which the nodes' Jobs
// name (their pods have no DNS). kewplan's own proxy Service is applied first, for its address: the proxy's
// Secret holds the URLs with it.
func (e *Engine) applyShared(ctx context.Context, secrets map[string]string, ps *proxyState) error {
	ke, cl := e.opts.Engine, e.opts.Cluster
	// Each brokered node's backstop, from now: the proxy refuses its placeholders after it whatever apply says.
	var endsAt map[string]time.Time
	if ps != nil {
		now := time.Now()
		endsAt = map[string]time.Time{}
		for _, np := range e.run.Plan.Nodes {
			if ps.brokers[np.Name] != "" {
				endsAt[np.Name] = adapter.BrokerEndsAt(e.run.Plan, np, now)
			}
		}
	}
	render := func() (*k8srender.Manifests, error) {
		m, _ := k8srender.Render(e.run.Plan, k8srender.Options{Engine: ke, RunID: e.run.ID, NameSuffix: e.nameSuffix(1),
			ProxySecrets: secrets, ProxyAddress: e.proxyAddress, CredentialKeys: e.credentialKeys, UpstreamCAPEM: e.upstreamCA,
			BrokerEndsAt: endsAt})
		if m == nil {
			return nil, errors.New("render the run's shared objects: the plan does not render")
		}
		return m, nil
	}
	m, err := render()
	if err != nil {
		return err
	}
	if proxied(e.run.Plan) {
		ns, name := ke.ProxyNamespace, ke.ProxyService
		if ke.ProxyImage != "" {
			svc := proxyService(m)
			if svc == nil {
				return errors.New("render the run's shared objects: kewplan's egress proxy has no Service")
			}
			if err := cl.Apply(ctx, []k8srender.Object{svc}); err != nil {
				return fmt.Errorf("apply the egress proxy's Service: %w", err)
			}
			ns, name = svc.GetNamespace(), svc.GetName()
		}
		if e.proxyAddress, err = cl.ServiceClusterIP(ctx, ns, name); err != nil {
			return err
		}
		if m, err = render(); err != nil {
			return err
		}
	}
	if err := cl.Apply(ctx, m.Shared); err != nil {
		return fmt.Errorf("apply the run's shared objects: %w", err)
	}
	if ke.ProxyImage != "" && proxied(e.run.Plan) {
		if ps == nil {
			ps = &proxyState{}
		}
		ps.service = proxyService(m).GetName()
		// Its decision log from its first line: the denials and brokered requests of every node.
		e.startProxyLog(ps, k8srender.ProxyUserNodes(ke, e.run.Plan))
		e.proxy.Store(ps)
		// A node's pod that started before the proxy is ready would find nothing behind its Service.
		if err := cl.WaitAvailable(ctx, ps.service, e.opts.ProxyReadyTimeout); err != nil {
			return fmt.Errorf("kewplan's egress proxy did not start: %w", err)
		}
	}
	return nil
}

// proxied says whether any node of the plan goes through the egress proxy (its network is not open).
func proxied(p *planner.Plan) bool {
	return slices.ContainsFunc(p.Nodes, func(np *planner.NodePlan) bool { return !np.Errors && np.Network != config.NetworkOpen })
}

// proxyService is kewplan's egress proxy Service among the rendered shared objects.
func proxyService(m *k8srender.Manifests) k8srender.Object {
	for _, o := range m.Shared {
		if o.GetObjectKind().GroupVersionKind().Kind == "Service" {
			return o
		}
	}
	return nil
}

// jobRun is what kewplan knows of a node's Job once its attempt is over.
type jobRun struct {
	outcome     k8sengine.Outcome
	observeErr  error
	feedErr     error
	deleteErr   error
	stream      adapter.StreamEnd
	timedOut    bool // kewplan's own deadline (the Job's plus grace) passed
	tail        *adapter.TailWriter
	timeout     time.Duration
	sawAgentLog bool
}

// Attempt is one attempt of a node on Kubernetes: render, apply, follow the agent's log into the stream, read the
// outcome, then the worker's commit or the reviewer's verdict. The node's objects are deleted on every path out
// of it.
func (e *Engine) Attempt(ctx context.Context, at *adapter.Attempt) *adapter.Failure {
	np, res := at.Node, at.Result
	if f := at.TakeSlot(ctx); f != nil {
		return f
	}
	cl := e.opts.Cluster
	// The shared objects first: the node's Job names the proxy's address, read once they are applied.
	if err := e.shared(ctx); err != nil {
		if ctx.Err() != nil {
			return adapter.Failed(ledger.StatusCancelled, "the apply was cancelled before the node's Job was created")
		}
		return &adapter.Failure{Status: ledger.StatusFailed, Reason: err.Error(), Class: config.RetryOnEngineError}
	}
	node, err := e.render(np, at.Number)
	if err != nil {
		return adapter.Failed(ledger.StatusFailed, err.Error())
	}
	if reason, over := at.BudgetStop(); over {
		return adapter.Failed(ledger.StatusSkipped, "its Job was not created: "+reason)
	}
	if f := e.attemptStarts(ctx, at); f != nil {
		return f
	}
	stream, f := at.OpenStream()
	if f != nil {
		return f
	}
	objs := node.Objects()
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := cl.Delete(dctx, objs); err != nil {
			at.Warn(fmt.Sprintf("%v (the run's end deletes every object of the run again)", err))
		}
	}()
	if err := cl.Apply(ctx, objs); err != nil {
		stream.Close(true)
		if ctx.Err() != nil {
			return adapter.Failed(ledger.StatusCancelled, "the apply was cancelled while the node's Job was created")
		}
		return &adapter.Failure{Status: ledger.StatusFailed, Reason: fmt.Sprintf("create the node's Job: %v", err), Class: config.RetryOnEngineError}
	}
	out := e.follow(ctx, at, node.Job.Name, stream)
	if out.stream.Killed || out.timedOut || out.stream.OutputOver || ctx.Err() != nil {
		// Stop the pod now, not at the end of the attempt: its agent may still spend.
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out.deleteErr = cl.Delete(dctx, []k8srender.Object{node.Job})
		cancel()
	}
	if out.outcome.AgentExit != nil {
		code := int64(*out.outcome.AgentExit)
		res.ExitCode = &code
	}
	if id := out.outcome.AgentImageID; id != "" && res.ImageID == "" {
		res.ImageID = id // the host cannot inspect a cluster's images: the pod's status says what ran
	}
	if f := judge(ctx, np, res, out); f != nil {
		f.Class = retryClass(ctx, f, res, out)
		return f
	}
	if np.Role == config.RoleReviewer {
		return e.review(ctx, at, out.outcome.Pod)
	}
	if out.outcome.Commit == "" {
		return adapter.Failed(ledger.StatusFailed, "the agent succeeded but its commits may not be published: the push step ended without the commit it pushed in its termination message")
	}
	res.Commit, res.Branch, res.Pushed = out.outcome.Commit, out.outcome.Branch, true
	res.Status = ledger.StatusSucceeded
	return nil
}

// follow waits for the agent step, follows its log into the stream (the pod's log is stdout and stderr merged),
// and waits for the Job's outcome. A crossed budget, the output limit, kewplan's deadline and cancellation each
// end the wait at once.
func (e *Engine) follow(ctx context.Context, at *adapter.Attempt, job string, stream adapter.Stream) *jobRun {
	cl := e.opts.Cluster
	out := &jobRun{tail: &adapter.TailWriter{Max: 512}, timeout: at.Node.Timeout}
	if out.timeout <= 0 {
		out.timeout = adapter.DefaultTimeout
	}
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	stream.Watch(runCtx, stopRun)
	var timedOut atomic.Bool
	deadline := time.AfterFunc(out.timeout+e.opts.DeadlineGrace, func() { timedOut.Store(true); stopRun() })

	agentStarted := func(o k8sengine.Outcome) bool {
		return o.Phase == k8sengine.PhaseSucceeded || o.Phase == k8sengine.PhaseFailed ||
			(o.Phase == k8sengine.PhaseRunning && o.Step != k8srender.StepClone)
	}
	o, err := e.wait(runCtx, job, agentStarted)
	var feedErr error
	// The agent ran (or runs) unless the pod never came, or the clone step failed, or the agent never started.
	if err == nil && o.Pod != "" && o.Step != k8srender.StepClone && !waitingReasons[o.Reason] {
		if rc, lerr := cl.OpenLog(runCtx, o.Pod, k8srender.StepAgent); lerr == nil {
			out.sawAgentLog = true
			_, cerr := io.Copy(io.MultiWriter(stream.Stdout(), out.tail), rc)
			rc.Close()
			if cerr != nil && runCtx.Err() == nil {
				feedErr = fmt.Errorf("follow the agent's log: %w", cerr)
			}
		} else if runCtx.Err() == nil {
			at.Warn(fmt.Sprintf("could not read the agent's log: %v", lerr))
		}
	}
	if err == nil && runCtx.Err() == nil && o.Phase != k8sengine.PhaseSucceeded && o.Phase != k8sengine.PhaseFailed {
		o, err = e.wait(runCtx, job, func(o k8sengine.Outcome) bool {
			return o.Phase == k8sengine.PhaseSucceeded || o.Phase == k8sengine.PhaseFailed
		})
	}
	deadline.Stop()
	stopRun()
	// The proxy's meter of the attempt is in its log: read it up to now before the attempt's figures are settled.
	if ctx.Err() == nil {
		e.syncProxyLog(at)
	}
	// Without a container run, an apply-wide stop that killed this node counts as its stop.
	out.stream = stream.Close(true)
	if feedErr != nil {
		out.stream.FeedErr = feedErr
	}
	out.outcome, out.observeErr = o, err
	out.timedOut = timedOut.Load()
	return out
}

// wait reads the node's Job, pods and events from the run's watch at each change until done says so, ctx ends,
// or the Job is deleted under it.
func (e *Engine) wait(ctx context.Context, job string, done func(k8sengine.Outcome) bool) (k8sengine.Outcome, error) {
	for {
		changed := e.watch.Changed()
		o, err := e.watch.Observe(job)
		if err != nil {
			return o, err
		}
		if done(o) {
			return o, nil
		}
		select {
		case <-ctx.Done():
			return o, ctx.Err()
		case <-changed:
		}
	}
}

// judge says how a node's Job ended: nil when every step succeeded with a clean stream, or the first reason it
// did not, in the precedence the Docker engine uses.
func judge(ctx context.Context, np *planner.NodePlan, res *ledger.NodeResult, out *jobRun) *adapter.Failure {
	o, st := out.outcome, out.stream
	switch {
	case st.BudgetStop != nil && ctx.Err() == nil:
		if out.deleteErr != nil {
			return adapter.Failed(ledger.StatusFailed, "the Job could not be confirmed deleted: "+out.deleteErr.Error())
		}
		return adapter.Failed(ledger.StatusBudgetExceeded, adapter.BudgetReason(st.BudgetStop, st.Killed, "kewplan deleted its Job"))
	case ctx.Err() != nil:
		return adapter.Failed(ledger.StatusCancelled, "the apply was cancelled; the node's Job was deleted")
	case st.OutputOver:
		limit := fmt.Sprintf("%d MiB", st.MaxOutput>>20)
		if st.MaxOutput < 1<<20 {
			limit = fmt.Sprintf("%d bytes", st.MaxOutput)
		}
		return adapter.Failed(ledger.StatusFailed, fmt.Sprintf("the agent wrote more than %s on its log; its Job was deleted and the rest of its output discarded", limit))
	case out.timedOut || o.Reason == "DeadlineExceeded":
		return adapter.Failed(ledger.StatusTimedOut, fmt.Sprintf("killed at its %s timeout (the Job's activeDeadlineSeconds)", out.timeout))
	case out.observeErr != nil:
		return adapter.Failed(ledger.StatusFailed, fmt.Sprintf("kubernetes: %v", out.observeErr))
	case o.Phase == k8sengine.PhaseFailed:
		return adapter.Failed(failure(np, o, out.tail))
	case st.FeedErr != nil:
		return adapter.Failed(ledger.StatusFailed, fmt.Sprintf("reading the agent's output: %v", st.FeedErr))
	case res.Totals.IsError:
		return adapter.Failed(ledger.StatusFailed, "the agent exited 0 but its stream reported an error")
	case !out.sawAgentLog:
		return adapter.Failed(ledger.StatusFailed, "the Job succeeded but kewplan could not read the agent's log, so nothing was metered")
	}
	return nil
}

// failure is the status and reason of a failed Job, by the step that failed.
func failure(np *planner.NodePlan, o k8sengine.Outcome, tail *adapter.TailWriter) (status, reason string) {
	msg := adapter.LastLine(o.Message)
	with := func(s string) string {
		if msg != "" {
			return s + ": " + msg
		}
		return s
	}
	switch {
	case o.Reason == "FailedCreate":
		return ledger.StatusFailed, with("the cluster refused to create the node's pod (with Pod Security \"restricted\", a pod that is not hardened enough is refused; see the namespace's events)")
	case waitingReasons[o.Reason]:
		return ledger.StatusFailed, with(fmt.Sprintf("the %s step could not start (%s)", o.Step, o.Reason))
	case o.Step == k8srender.StepClone:
		return ledger.StatusFailed, with(fmt.Sprintf("the clone step exited with status %d (repository %s at %q)", o.ExitCode, np.Repo, np.Ref))
	case o.Step == k8srender.StepAgent:
		if msg == "" {
			msg = tail.LastLine()
		}
		return ledger.StatusFailed, adapter.ExitReason(np, int64(o.ExitCode), msg)
	case o.Step == k8srender.StepPush && o.ExitCode == k8srender.ExitPromptCommitted:
		return ledger.StatusHeld, "held for a human: the agent committed .kew-prompt.txt, so the push step refused to push"
	case o.Step == k8srender.StepPush && o.ExitCode == k8srender.ExitVerdictCommitted:
		return ledger.StatusHeld, "held for a human: the agent committed a reviewer sidecar .kew-review-verdict.json, which a downstream reviewer would read as its verdict, so the push step refused to push"
	case o.Step == k8srender.StepPush && o.ExitCode == k8srender.ExitProtectedBranch:
		return ledger.StatusFailed, with(fmt.Sprintf("the agent succeeded but its push was refused: %s: the branch %q is protected or the remote's default branch", planner.RulePushProtectedBranch, np.Branch))
	case o.Step == k8srender.StepPush && o.ExitCode == k8srender.ExitHistoryUnchecked:
		return ledger.StatusHeld, with("held for a human: the push step could not check every commit of the agent, so it refused to push")
	case o.Step == k8srender.StepVerdict && o.ExitCode == k8srender.ExitVerdictCommitted:
		return ledger.StatusHeld, "held for a human: the reviewer's verdict sidecar is the one the repository carried (the clone step removed it and the reviewer restored it), not the reviewer's own"
	case o.Step == k8srender.StepPush:
		return ledger.StatusFailed, with(fmt.Sprintf("the agent succeeded but its commits were not published: the push step exited with status %d", o.ExitCode))
	case o.Step == k8srender.StepVerdict:
		return ledger.StatusHeld, with(fmt.Sprintf("held for a human: the verdict step exited with status %d", o.ExitCode))
	}
	r := "the node's Job failed"
	if o.Reason != "" {
		r += " (" + o.Reason + ")"
	}
	return ledger.StatusFailed, with(r)
}

// waitingReasons are the reasons JobOutcome gives a step that could not start.
var waitingReasons = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true,
	"CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true,
}

// retryClass says which retry class a failed attempt on Kubernetes belongs to, or "" when none may retry it.
func retryClass(ctx context.Context, f *adapter.Failure, res *ledger.NodeResult, out *jobRun) string {
	if ctx.Err() != nil || out.stream.OutputOver || out.stream.BudgetStop != nil || out.deleteErr != nil {
		return ""
	}
	switch {
	case f.Status == ledger.StatusTimedOut:
		return config.RetryOnTimeout
	case f.Status != ledger.StatusFailed:
		return ""
	case out.observeErr != nil || waitingReasons[out.outcome.Reason]:
		return config.RetryOnEngineError
	case res.Totals.APIError != "":
		return config.RetryOnAPIError
	}
	return ""
}

// review reads the reviewer's verdict from the verdict step's log and judges it with Docker's rules.
func (e *Engine) review(ctx context.Context, at *adapter.Attempt, pod string) *adapter.Failure {
	np, res := at.Node, at.Result
	if isCommit(np.Ref) {
		res.Commit = np.Ref
	}
	var (
		data  []byte
		found bool
	)
	rc, err := e.opts.Cluster.OpenLog(ctx, pod, k8srender.StepVerdict)
	if err == nil {
		data, found, err = k8sengine.ReadVerdict(rc)
		rc.Close()
	}
	if err != nil {
		if ctx.Err() != nil {
			return adapter.Failed(ledger.StatusCancelled, "the apply was cancelled while the verdict was read")
		}
		return adapter.Failed(ledger.StatusHeld, fmt.Sprintf("held for a human: %v", err))
	}
	v, err := verdict.FromSidecar(data, found, at.VerdictCopy)
	if err != nil {
		return adapter.Failed(ledger.StatusHeld, fmt.Sprintf("held for a human: %v", err))
	}
	res.Verdict = v
	return adapter.VerdictStatus(v, res)
}

func isCommit(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	return !slices.ContainsFunc([]byte(s), func(c byte) bool { return !strings.ContainsRune("0123456789abcdef", rune(c)) })
}
