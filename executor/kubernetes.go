package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/egress"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/verdict"
	"github.com/kewplan/kewplan/k8sengine"
	"github.com/kewplan/kewplan/k8srender"
	"github.com/kewplan/kewplan/planner"
	"github.com/kewplan/kewplan/runners"
)

// The Kubernetes path of the apply loop. The loop keeps the graph, parallelism, retries, budgets, ledger and
// events; only a node's attempt differs: instead of a checkout and a container on this host, the node is rendered
// by k8srender (with its upstream outputs, re-planned as on Docker) and run as a Job that clones, runs the agent
// and pushes or reads the verdict inside its pod. kewplan follows the agent step's log into the same meter,
// transcript and budgets, reads the outcome from the Job, its pod and its events, and deletes the node's objects
// (foreground) when the attempt ends, and every object of the run when the apply ends or is cancelled.

// KubernetesOptions select the Kubernetes engine for an apply (ApplyOptions.Kubernetes); nil applies on Docker.
type KubernetesOptions struct {
	// Engine is the configuration's engine "kubernetes" block: namespace, Secrets, runtime class, proxy.
	Engine *config.KubernetesEngine
	// Cluster is the namespace the Jobs go to (k8sengine.New, or k8stest.FakeAPI over a fake clientset in tests).
	Cluster *k8sengine.Cluster
	// PollInterval is how often a node's Job, pod and events are read while it waits or runs; 0 means 1s.
	PollInterval time.Duration
	// DeadlineGrace is how long past a node's timeout (the Job's activeDeadlineSeconds) kewplan waits for the
	// cluster to end the Job before it deletes the Job itself; 0 means 30s.
	DeadlineGrace time.Duration
}

// k8sState is the apply's Kubernetes engine: its options and the run's shared objects, applied once.
type k8sState struct {
	opts       KubernetesOptions
	sharedOnce sync.Once
	sharedErr  error
}

func newK8sState(o *KubernetesOptions) *k8sState {
	if o == nil {
		return nil
	}
	s := &k8sState{opts: *o}
	if s.opts.PollInterval <= 0 {
		s.opts.PollInterval = time.Second
	}
	if s.opts.DeadlineGrace <= 0 {
		s.opts.DeadlineGrace = 30 * time.Second
	}
	return s
}

// k8sPreflight is preflight on Kubernetes: the state lock, the plan's nodes, then the cluster (the API answers,
// the namespace, its Pod Security level, the Secrets and their keys, the runtime class). Docker's image and
// network checks do not apply: the images are pulled by the cluster, the network is the NetworkPolicy.
func (a *applier) k8sPreflight(ctx context.Context, lockErr error) error {
	var problems []string
	if lockErr != nil {
		problems = append(problems, lockErr.Error())
	}
	if a.k8s.opts.Engine == nil || a.k8s.opts.Cluster == nil {
		problems = append(problems, `apply on Kubernetes needs the configuration's engine "kubernetes" block and a cluster to connect to`)
		return &PreflightError{Problems: problems}
	}
	for _, np := range a.opts.Plan.Nodes {
		if p := nodePlanProblem(np); p != "" {
			problems = append(problems, p)
		}
	}
	// The credentials: like Docker's check of kewplan's environment, each node's runner needs at least one of its
	// names as a key of the credentials Secret (a runner may accept either of two); the others stay unset.
	rep, err := a.k8s.opts.Cluster.Preflight(ctx, a.k8s.opts.Engine, nil)
	if err != nil {
		problems = append(problems, err.Error())
	} else {
		problems = append(problems, rep.Errors...)
		a.envWarnings = append(a.envWarnings, rep.Warnings...)
		problems = append(problems, a.k8sCredentialProblems(ctx)...)
	}
	if len(problems) > 0 {
		return &PreflightError{Problems: problems}
	}
	return nil
}

// k8sCredentialProblems names each node none of whose runner's credentials is a key of the credentials Secret.
func (a *applier) k8sCredentialProblems(ctx context.Context) []string {
	e := a.k8s.opts.Engine
	keys, found, err := a.k8s.opts.Cluster.SecretKeys(ctx, e.CredentialsSecret)
	if err != nil {
		return []string{err.Error()}
	}
	if !found {
		return nil // Preflight reported the missing Secret
	}
	var problems []string
	for _, np := range a.opts.Plan.Nodes {
		if len(np.Credentials) == 0 || slices.ContainsFunc(np.Credentials, func(c string) bool { return slices.Contains(keys, c) }) {
			continue
		}
		problems = append(problems, fmt.Sprintf("node %q: none of runner %q's credentials is a key of the Secret %q (%s); add one, for example `kubectl -n %s create secret generic %s --from-literal=%s=…` (or patch the existing Secret)",
			np.Name, np.Runner, e.CredentialsSecret, strings.Join(np.Credentials, ", "), e.Namespace, e.CredentialsSecret, np.Credentials[0]))
	}
	return problems
}

// k8sSweep deletes the objects of runs this state directory started and that are dead: a run this ledger records
// is dead once this apply holds the state lock (AbandonStale has just said so). Objects of runs this ledger does
// not know belong to another state directory or user, and are left alone, as on Docker.
func (a *applier) k8sSweep(ctx context.Context) {
	live := func(run string) bool {
		if run == a.runID {
			return true
		}
		_, _, err := a.ledger.Run(run)
		return err != nil
	}
	swept, err := a.k8s.opts.Cluster.Sweep(ctx, live)
	if err != nil {
		a.warn("", fmt.Sprintf("could not remove the Kubernetes objects left by a dead run: %v", err))
	}
	for _, s := range swept {
		a.warn("", "removed "+s+" left by a run that ended without cleaning up (kewplan was killed?)")
	}
}

// k8sEnd deletes every object of the run (foreground), with a context of its own: it runs after a cancellation
// too, so that no Job, pod or Secret is left behind.
func (a *applier) k8sEnd() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := a.k8s.opts.Cluster.DeleteRun(ctx, a.runID); err != nil {
		a.warn("", fmt.Sprintf("%v; delete what is left with `kubectl delete jobs,pods,secrets,networkpolicies -n %s -l %s=%s`",
			err, a.k8s.opts.Cluster.Namespace, k8srender.LabelRun, a.runID))
	}
}

// k8sDeleteRun is the janitor's last attempt on a second interrupt.
func (a *applier) k8sDeleteRun(ctx context.Context) error {
	return a.k8s.opts.Cluster.DeleteRun(ctx, a.runID)
}

// k8sNameSuffix names a node's objects in this run and attempt: the run id, lower-cased (an object name is a DNS
// label), and the attempt from the second on, so a retry is a fresh Job.
func (a *applier) k8sNameSuffix(attempt int) string {
	s := strings.ToLower(a.runID)
	if attempt > 1 {
		s += fmt.Sprintf("-a%d", attempt)
	}
	return s
}

// k8sRender renders one re-planned node for this run and attempt.
func (a *applier) k8sRender(np *planner.NodePlan, attempt int) (*k8srender.NodeObjects, error) {
	p := &planner.Plan{Nodes: []*planner.NodePlan{np}, ConfigDigest: a.opts.Plan.ConfigDigest}
	m, diags := k8srender.Render(p, k8srender.Options{Engine: a.k8s.opts.Engine, RunID: a.runID, NameSuffix: a.k8sNameSuffix(attempt)})
	if diags.HasErrors() || m == nil || len(m.Nodes) != 1 {
		return nil, fmt.Errorf("render the node's Kubernetes objects: %s", config.DiagnosticsText(diags))
	}
	return m.Nodes[0], nil
}

// k8sShared applies the run's shared objects (the egress NetworkPolicy, the proxy's objects) once, before the
// first node's Job; every node fails with the same reason when that did not work. They are rendered from the
// whole plan, not from the first node's: the NetworkPolicy is open only when every node's network is.
func (a *applier) k8sShared(ctx context.Context) error {
	a.k8s.sharedOnce.Do(func() {
		// kewplan's egress proxy (proxy_image) gets a fresh secret per user and run; render's derived ones are
		// only for manifests that must not change between renders.
		secrets := map[string]string{}
		for _, user := range k8srender.ProxyUsers(a.k8s.opts.Engine, a.opts.Plan) {
			secret, err := egress.NewSecret()
			if err != nil {
				a.k8s.sharedErr = fmt.Errorf("egress proxy secret: %w", err)
				return
			}
			secrets[user] = secret
		}
		m, _ := k8srender.Render(a.opts.Plan, k8srender.Options{Engine: a.k8s.opts.Engine, RunID: a.runID, NameSuffix: a.k8sNameSuffix(1), ProxySecrets: secrets})
		if m == nil {
			a.k8s.sharedErr = errors.New("render the run's shared objects: the plan does not render")
			return
		}
		if err := a.k8s.opts.Cluster.Apply(ctx, m.Shared); err != nil {
			a.k8s.sharedErr = fmt.Errorf("apply the run's shared objects: %w", err)
		}
	})
	return a.k8s.sharedErr
}

// k8sRun is what kewplan knows of a node's Job once its attempt is over.
type k8sRun struct {
	outcome     k8sengine.Outcome
	observeErr  error
	feedErr     error
	deleteErr   error
	budgetStop  *ledger.BudgetStop
	killed      bool // a budget killed the Job
	timedOut    bool // kewplan's own deadline (the Job's plus grace) passed
	outputOver  bool
	maxOutput   int64
	tail        *tailWriter
	timeout     time.Duration
	sawAgentLog bool
}

// attemptKubernetes is one attempt of a node on Kubernetes: render, apply, follow the agent's log into the meter,
// read the outcome, then the worker's commit or the reviewer's verdict. The node's objects are deleted on every
// path out of it.
func (a *applier) attemptKubernetes(ctx context.Context, np *planner.NodePlan, res *ledger.NodeResult) *nodeFailure {
	cl := a.k8s.opts.Cluster
	node, err := a.k8sRender(np, res.Attempts)
	if err != nil {
		return failed(ledger.StatusFailed, err.Error())
	}
	if err := a.k8sShared(ctx); err != nil {
		if ctx.Err() != nil {
			return failed(ledger.StatusCancelled, "the apply was cancelled before the node's Job was created")
		}
		return &nodeFailure{status: ledger.StatusFailed, reason: err.Error(), class: config.RetryOnEngineError}
	}
	if d, over := a.budget.exceeded(); over {
		return failed(ledger.StatusSkipped, "its Job was not created: "+d.String())
	}
	stdoutLog, stderrLog, logFailure := a.openLogs(np, res)
	if logFailure != nil {
		return logFailure
	}
	defer stdoutLog.Close()
	defer stderrLog.Close()
	maskedOut, _, flushLogs := a.maskedLogs(np.Credentials, stdoutLog, stderrLog)

	objs := node.Objects()
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := cl.Delete(dctx, objs); err != nil {
			a.warn(np.Name, fmt.Sprintf("%v (the run's end deletes every object of the run again)", err))
		}
	}()
	if err := cl.Apply(ctx, objs); err != nil {
		if ctx.Err() != nil {
			return failed(ledger.StatusCancelled, "the apply was cancelled while the node's Job was created")
		}
		return &nodeFailure{status: ledger.StatusFailed, reason: fmt.Sprintf("create the node's Job: %v", err), class: config.RetryOnEngineError}
	}
	out := a.k8sFollow(ctx, np, node.Job.Name, res, maskedOut)
	if err := flushLogs(); err != nil {
		a.warn(np.Name, fmt.Sprintf("could not write the end of the node's logs: %v", err))
	}
	if out.killed || out.timedOut || out.outputOver || ctx.Err() != nil {
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
	f := a.judgeKubernetes(ctx, np, res, out)
	if f != nil {
		f.class = k8sRetryClass(ctx, f, res, out)
		return f
	}
	if np.Role == config.RoleReviewer {
		return a.k8sReview(ctx, np, res, out.outcome.Pod)
	}
	if out.outcome.Commit == "" {
		return failed(ledger.StatusFailed, "the agent succeeded but its commits may not be published: the push step ended without the commit it pushed in its termination message")
	}
	res.Commit, res.Branch, res.Pushed = out.outcome.Commit, out.outcome.Branch, true
	res.Status = ledger.StatusSucceeded
	return nil
}

// k8sFollow waits for the agent step, follows its log into the meter, transcript and budgets (the pod's log is
// stdout and stderr merged), and waits for the Job's outcome. A crossed budget, the output limit, kewplan's
// deadline and cancellation each end the wait at once.
func (a *applier) k8sFollow(ctx context.Context, np *planner.NodePlan, job string, res *ledger.NodeResult, transcript io.Writer) *k8sRun {
	cl := a.k8s.opts.Cluster
	out := &k8sRun{tail: &tailWriter{max: 512}, timeout: np.Timeout, maxOutput: a.opts.MaxOutputBytes}
	if out.timeout <= 0 {
		out.timeout = DefaultTimeout
	}
	meter := a.nodeMeter(np, res)
	pr, pw := io.Pipe()
	feedDone := make(chan error, 1)
	go func() {
		err := runners.Feed(pr, meter.progress, transcript)
		_, _ = io.Copy(io.Discard, pr)
		feedDone <- err
	}()
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	budget := &outputBudget{max: a.opts.MaxOutputBytes, exceeded: stopRun}
	budgetDone := meter.budget.watch(runCtx, stopRun)
	var timedOut atomic.Bool
	deadline := time.AfterFunc(out.timeout+a.k8s.opts.DeadlineGrace, func() { timedOut.Store(true); stopRun() })

	agentStarted := func(o k8sengine.Outcome) bool {
		return o.Phase == k8sengine.PhaseSucceeded || o.Phase == k8sengine.PhaseFailed ||
			(o.Phase == k8sengine.PhaseRunning && o.Step != k8srender.StepClone)
	}
	o, err := a.k8sWait(runCtx, job, agentStarted)
	// The agent ran (or runs) unless the pod never came, or the clone step failed, or the agent never started.
	if err == nil && o.Pod != "" && o.Step != k8srender.StepClone && !waitingReasons[o.Reason] {
		if rc, lerr := cl.OpenLog(runCtx, o.Pod, k8srender.StepAgent); lerr == nil {
			out.sawAgentLog = true
			_, cerr := io.Copy(budget.writer(io.MultiWriter(pw, out.tail)), rc)
			rc.Close()
			if cerr != nil && runCtx.Err() == nil {
				out.feedErr = fmt.Errorf("follow the agent's log: %w", cerr)
			}
		} else if runCtx.Err() == nil {
			a.warn(np.Name, fmt.Sprintf("could not read the agent's log: %v", lerr))
		}
	}
	pw.Close()
	if ferr := <-feedDone; ferr != nil && out.feedErr == nil {
		out.feedErr = ferr
	}
	if err == nil && runCtx.Err() == nil && o.Phase != k8sengine.PhaseSucceeded && o.Phase != k8sengine.PhaseFailed {
		o, err = a.k8sWait(runCtx, job, func(o k8sengine.Outcome) bool {
			return o.Phase == k8sengine.PhaseSucceeded || o.Phase == k8sengine.PhaseFailed
		})
	}
	deadline.Stop()
	stopRun()
	budgetDone()
	out.outcome, out.observeErr = o, err
	out.outputOver = budget.over.Load()
	out.timedOut = timedOut.Load()
	// settle's agentRun without a container run: an apply-wide stop that killed this node counts as its stop.
	out.budgetStop = meter.budget.settle(res, &agentRun{})
	out.killed = meter.budget.killed.Load()
	res.Totals = meter.Totals()
	return out
}

// k8sWait reads the node's Job, pod and events every PollInterval until done says so, ctx ends, or the API fails.
func (a *applier) k8sWait(ctx context.Context, job string, done func(k8sengine.Outcome) bool) (k8sengine.Outcome, error) {
	t := time.NewTicker(a.k8s.opts.PollInterval)
	defer t.Stop()
	for {
		o, err := a.k8s.opts.Cluster.Observe(ctx, job)
		if err != nil {
			if ctx.Err() != nil {
				return o, ctx.Err()
			}
			return o, err
		}
		if done(o) {
			return o, nil
		}
		select {
		case <-ctx.Done():
			return o, ctx.Err()
		case <-t.C:
		}
	}
}

// judgeKubernetes says how a node's Job ended: nil when every step succeeded with a clean stream, or the first
// reason it did not, in the precedence Docker's judgeRun uses.
func (a *applier) judgeKubernetes(ctx context.Context, np *planner.NodePlan, res *ledger.NodeResult, out *k8sRun) *nodeFailure {
	o := out.outcome
	switch {
	case out.budgetStop != nil && ctx.Err() == nil:
		if out.deleteErr != nil {
			return failed(ledger.StatusFailed, "the Job could not be confirmed deleted: "+out.deleteErr.Error())
		}
		reason := budgetReason(out.budgetStop, out.killed)
		return failed(ledger.StatusBudgetExceeded, strings.Replace(reason, "killed its container", "deleted its Job", 1))
	case ctx.Err() != nil:
		return failed(ledger.StatusCancelled, "the apply was cancelled; the node's Job was deleted")
	case out.outputOver:
		limit := fmt.Sprintf("%d MiB", out.maxOutput>>20)
		if out.maxOutput < 1<<20 {
			limit = fmt.Sprintf("%d bytes", out.maxOutput)
		}
		return failed(ledger.StatusFailed, fmt.Sprintf("the agent wrote more than %s on its log; its Job was deleted and the rest of its output discarded", limit))
	case out.timedOut || o.Reason == "DeadlineExceeded":
		return failed(ledger.StatusTimedOut, fmt.Sprintf("killed at its %s timeout (the Job's activeDeadlineSeconds)", out.timeout))
	case out.observeErr != nil:
		return failed(ledger.StatusFailed, fmt.Sprintf("kubernetes: %v", out.observeErr))
	case o.Phase == k8sengine.PhaseFailed:
		return failed(k8sFailure(np, o, out.tail))
	case out.feedErr != nil:
		return failed(ledger.StatusFailed, fmt.Sprintf("reading the agent's output: %v", out.feedErr))
	case res.Totals.IsError:
		return failed(ledger.StatusFailed, "the agent exited 0 but its stream reported an error")
	case !out.sawAgentLog:
		return failed(ledger.StatusFailed, "the Job succeeded but kewplan could not read the agent's log, so nothing was metered")
	}
	return nil
}

// k8sFailure is the status and reason of a failed Job, by the step that failed.
func k8sFailure(np *planner.NodePlan, o k8sengine.Outcome, tail *tailWriter) (status, reason string) {
	msg := lastLine(o.Message)
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
			msg = tail.lastLine()
		}
		t := &tailWriter{max: 512}
		_, _ = t.Write([]byte(msg))
		return ledger.StatusFailed, exitReason(np, int64(o.ExitCode), t)
	case o.Step == k8srender.StepPush && o.ExitCode == 65:
		return ledger.StatusHeld, "held for a human: the agent committed .kew-prompt.txt, so the push step refused to push"
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

// lastLine is the last non-empty line of s, bounded as tailWriter.lastLine bounds it.
func lastLine(s string) string {
	t := &tailWriter{max: 4096}
	_, _ = t.Write([]byte(s))
	return t.lastLine()
}

// k8sRetryClass says which retry class a failed attempt on Kubernetes belongs to, or "" when none may retry it.
func k8sRetryClass(ctx context.Context, f *nodeFailure, res *ledger.NodeResult, out *k8sRun) string {
	if ctx.Err() != nil || out.outputOver || out.budgetStop != nil || out.deleteErr != nil {
		return ""
	}
	switch {
	case f.status == ledger.StatusTimedOut:
		return config.RetryOnTimeout
	case f.status != ledger.StatusFailed:
		return ""
	case out.observeErr != nil || waitingReasons[out.outcome.Reason]:
		return config.RetryOnEngineError
	case res.Totals.APIError != "":
		return config.RetryOnAPIError
	}
	return ""
}

// k8sReview reads the reviewer's verdict from the verdict step's log and judges it with Docker's rules.
func (a *applier) k8sReview(ctx context.Context, np *planner.NodePlan, res *ledger.NodeResult, pod string) *nodeFailure {
	if isCommit(np.Ref) {
		res.Commit = np.Ref
	}
	store := filepath.Join(a.stateDir, "verdicts", a.runID, nodePathName(np))
	var (
		data  []byte
		found bool
		err   error
	)
	rc, err := a.k8s.opts.Cluster.OpenLog(ctx, pod, k8srender.StepVerdict)
	if err == nil {
		data, found, err = k8sengine.ReadVerdict(rc)
		rc.Close()
	}
	if err != nil {
		if ctx.Err() != nil {
			return failed(ledger.StatusCancelled, "the apply was cancelled while the verdict was read")
		}
		return failed(ledger.StatusHeld, fmt.Sprintf("held for a human: %v", err))
	}
	v, err := verdict.FromSidecar(data, found, store)
	if err != nil {
		return failed(ledger.StatusHeld, fmt.Sprintf("held for a human: %v", err))
	}
	res.Verdict = v
	return a.verdictStatus(v, res)
}

// verdictStatus turns a parsed verdict into the node's status, as judgeReview does on Docker.
func (a *applier) verdictStatus(v *verdict.Verdict, res *ledger.NodeResult) *nodeFailure {
	switch v.Verdict {
	case verdict.Approve:
		res.Status = ledger.StatusApproved
		return nil
	case verdict.RequestChanges:
		return failed(ledger.StatusChangesRequested, "the reviewer requested changes")
	case verdict.Reject:
		return failed(ledger.StatusRejected, "the reviewer rejected the change")
	}
	return failed(ledger.StatusHeld, fmt.Sprintf("held for a human: unknown verdict %q", v.Verdict))
}

func isCommit(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	return !slices.ContainsFunc([]byte(s), func(c byte) bool { return !strings.ContainsRune("0123456789abcdef", rune(c)) })
}
