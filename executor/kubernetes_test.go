package executor

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/executor/kubernetes"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/statedir"
	"github.com/kewplan/kewplan/internal/testtools/k8stest"
	"github.com/kewplan/kewplan/k8sengine"
	"github.com/kewplan/kewplan/k8srender"
	"github.com/kewplan/kewplan/planner"
	"github.com/kewplan/kewplan/runners"
)

// The apply loop on Kubernetes, driven end to end against client-go's fake clientset. There is no kubelet, so a
// small simulator stands in for one: once kewplan has created a node's Job, it "runs" the Job as the script of
// the test says, creating the pod with the statuses a kubelet would report (init containers done, the agent
// terminated with its exit status and, on error, its log's tail as the termination message, the push step's
// termination message with the commit), or the FailedCreate event of a Pod Security refusal, or the Job's
// DeadlineExceeded condition; and it serves each container's log from the captured streams.

const k8sNamespace = "agents"

// simRun is how the simulated kubelet runs one attempt of a node.
type simRun struct {
	agentLog   string // the agent step's log (stdout and stderr merged, as the kubelet keeps it)
	agentExit  int32
	cloneExit  int32
	pushExit   int32
	commit     string
	verdictLog string
	refused    string // a FailedCreate event with this message instead of a pod
	deadline   bool   // the Job controller fails the Job at its activeDeadlineSeconds
	block      bool   // the agent keeps running: its log blocks after agentLog until the reader's context ends
	pending    bool   // the pod is never scheduled: nothing is created
}

type kubelet struct {
	t        *testing.T
	cs       *fake.Clientset
	script   func(node string, attempt int) simRun
	mu       sync.Mutex
	jobs     []string          // every Job kewplan applied, in order
	ran      map[string]bool   // Jobs already run
	attempts map[string]int    // per node
	pods     map[string]simRun // by pod name
	opened   chan string       // pod of every agent log opened
	watches  int               // watches kewplan opened
}

func newKubelet(t *testing.T, script func(node string, attempt int) simRun) *kubelet {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: k8sNamespace, Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}
	git := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kewplan-git", Namespace: k8sNamespace}, Data: map[string][]byte{"token": []byte("s3cret-git")}}
	keys := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "agent-keys", Namespace: k8sNamespace}, Data: map[string][]byte{"ANTHROPIC_API_KEY": []byte("s3cret-key")}}
	k := &kubelet{t: t, cs: fake.NewClientset(ns, git, keys), script: script, ran: map[string]bool{}, attempts: map[string]int{},
		pods: map[string]simRun{}, opened: make(chan string, 16)}
	k.cs.PrependReactor("patch", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		name := a.(k8stesting.PatchAction).GetName()
		k.mu.Lock()
		defer k.mu.Unlock()
		if k.watches == 0 {
			return false, nil, nil // a test's own objects, applied before kewplan started
		}
		k.jobs = append(k.jobs, name)
		go k.runWhenCreated(name)
		return false, nil, nil
	})
	k.cs.PrependReactor("delete", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		k.mu.Lock()
		k.ran[a.(k8stesting.DeleteAction).GetName()] = true // a deleted Job's pod is never created
		k.mu.Unlock()
		return false, nil, nil
	})
	k.cs.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		k.mu.Lock()
		k.watches++
		k.mu.Unlock()
		return false, nil, nil
	})
	return k
}

// runWhenCreated runs a Job once the tracker holds it and kewplan watches the run's Jobs, pods and events: the
// fake clientset's watches start from now, not from a list's resource version, so the simulator must not
// create a pod before they are open.
func (k *kubelet) runWhenCreated(name string) {
	for i := 0; i < 5000; i++ {
		k.mu.Lock()
		watching, gone := k.watches >= 3, k.ran[name]
		k.mu.Unlock()
		if gone {
			return // deleted before it ran
		}
		if _, err := k.cs.Tracker().Get(jobsGVR, k8sNamespace, name); err == nil && watching {
			k.run(name)
			return
		}
		time.Sleep(time.Millisecond)
	}
	k.t.Errorf("simulator: Job %s was never created, or kewplan never watched", name)
}

var (
	jobsGVR   = batchv1.SchemeGroupVersion.WithResource("jobs")
	podsGVR   = corev1.SchemeGroupVersion.WithResource("pods")
	eventsGVR = corev1.SchemeGroupVersion.WithResource("events")
)

// run is the kubelet and the Job controller at once, the first time a Job is read. It is called inside the fake
// clientset's reactor chain, so it talks to the object tracker directly.
func (k *kubelet) run(name string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ran[name] {
		return
	}
	obj, err := k.cs.Tracker().Get(jobsGVR, k8sNamespace, name)
	if err != nil {
		return // a Job already deleted: the API answers NotFound
	}
	k.ran[name] = true
	job := obj.(*batchv1.Job).DeepCopy()
	node := job.Annotations[k8srender.AnnotationNode]
	k.attempts[node]++
	sim := k.script(node, k.attempts[node])
	if sim.pending {
		return
	}
	now := metav1.Now()
	if sim.refused != "" {
		ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name + ".refused", Namespace: k8sNamespace},
			InvolvedObject: corev1.ObjectReference{Kind: "Job", Name: name, Namespace: k8sNamespace},
			Reason:         "FailedCreate", Message: sim.refused, LastTimestamp: now, Type: corev1.EventTypeWarning}
		if err := k.cs.Tracker().Create(eventsGVR, ev, k8sNamespace); err != nil {
			k.t.Errorf("simulator: %v", err)
		}
		return
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name + "-x7k2p", Namespace: k8sNamespace, CreationTimestamp: now,
		Labels: map[string]string{"batch.kubernetes.io/job-name": name}}}
	for key, v := range job.Spec.Template.Labels {
		pod.Labels[key] = v
	}
	// A kubelet reports the image a started container runs as the runtime resolved it: its digest reference here.
	imageID := func(step string) string {
		spec := job.Spec.Template.Spec
		for _, c := range append(append([]corev1.Container(nil), spec.InitContainers...), spec.Containers...) {
			if c.Name == step {
				return "resolved://" + c.Image
			}
		}
		return ""
	}
	terminated := func(step string, code int32, msg string) corev1.ContainerStatus {
		reason := "Completed"
		if code != 0 {
			reason = "Error"
		}
		return corev1.ContainerStatus{Name: step, ImageID: imageID(step),
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, Message: msg}}}
	}
	last := job.Spec.Template.Spec.Containers[0].Name
	running := func(step string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: step, ImageID: imageID(step),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}
	}
	waiting := corev1.ContainerStatus{Name: last, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}
	st := &pod.Status
	switch {
	case sim.cloneExit != 0:
		st.Phase = corev1.PodFailed
		st.InitContainerStatuses = []corev1.ContainerStatus{terminated(k8srender.StepClone, sim.cloneExit, "fatal: couldn't find remote ref")}
	case sim.block || sim.deadline:
		st.Phase = corev1.PodRunning
		st.InitContainerStatuses = []corev1.ContainerStatus{terminated(k8srender.StepClone, 0, ""), running(k8srender.StepAgent)}
		st.ContainerStatuses = []corev1.ContainerStatus{waiting}
	case sim.agentExit != 0:
		// terminationMessagePolicy FallbackToLogsOnError: the log's tail is the termination message.
		st.Phase = corev1.PodFailed
		st.InitContainerStatuses = []corev1.ContainerStatus{terminated(k8srender.StepClone, 0, ""), terminated(k8srender.StepAgent, sim.agentExit, logTail(sim.agentLog))}
		st.ContainerStatuses = []corev1.ContainerStatus{waiting}
	default:
		msg := ""
		if last == k8srender.StepPush && sim.pushExit == 0 {
			msg = fmt.Sprintf(`{"commit":%q,"branch":"kew/fix"}`, sim.commit)
		}
		st.Phase = corev1.PodSucceeded
		if sim.pushExit != 0 {
			st.Phase = corev1.PodFailed
		}
		st.InitContainerStatuses = []corev1.ContainerStatus{terminated(k8srender.StepClone, 0, ""), terminated(k8srender.StepAgent, 0, "")}
		st.ContainerStatuses = []corev1.ContainerStatus{terminated(last, sim.pushExit, msg)}
	}
	if err := k.cs.Tracker().Create(podsGVR, pod, k8sNamespace); err != nil {
		k.t.Errorf("simulator: %v", err)
	}
	k.pods[pod.Name] = sim
	if sim.deadline {
		job.Status.Conditions = append(job.Status.Conditions, batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue,
			Reason: "DeadlineExceeded", Message: "Job was active longer than specified deadline"})
		if err := k.cs.Tracker().Update(jobsGVR, job, k8sNamespace); err != nil {
			k.t.Errorf("simulator: %v", err)
		}
	}
}

// logTail is what the kubelet keeps as the termination message of a failed container: the log's last lines.
func logTail(log string) string {
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return strings.Join(lines, "\n")
}

// logs serves each container's log, as the kubelet would through pods/log.
func (k *kubelet) logs(ctx context.Context, pod, step string) (io.ReadCloser, error) {
	k.mu.Lock()
	sim, ok := k.pods[pod]
	k.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("pods %q not found", pod)
	}
	switch step {
	case k8srender.StepAgent:
		k.opened <- pod
		if sim.block {
			return &blockingLog{r: strings.NewReader(sim.agentLog), ctx: ctx}, nil
		}
		return io.NopCloser(strings.NewReader(sim.agentLog)), nil
	case k8srender.StepVerdict:
		return io.NopCloser(strings.NewReader(sim.verdictLog)), nil
	}
	return nil, fmt.Errorf("container %q is not valid for pod %q", step, pod)
}

// blockingLog is a followed log whose container keeps running: it ends when the follower's context does.
type blockingLog struct {
	r   io.Reader
	ctx context.Context
}

func (b *blockingLog) Read(p []byte) (int, error) {
	if n, err := b.r.Read(p); err != io.EOF {
		return n, err
	}
	<-b.ctx.Done()
	return 0, b.ctx.Err()
}

func (b *blockingLog) Close() error { return nil }

func (k *kubelet) jobNames() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for _, j := range k.jobs {
		if !seen[j] {
			seen[j] = true
			out = append(out, j)
		}
	}
	return out
}

func stream(t *testing.T, runner, scenario string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "runners", "testdata", "streams", runner, scenario+".ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// metered is what the runner's meter reads from a stream: what the ledger must record for a node that wrote it.
func metered(t *testing.T, protocol, model, s string) runners.RunTotals {
	t.Helper()
	m, ok := runners.NewMeter(protocol, model)
	if !ok {
		t.Fatalf("no meter for %s", protocol)
	}
	if err := runners.Feed(strings.NewReader(s), m, io.Discard); err != nil {
		t.Fatal(err)
	}
	return m.Totals()
}

func verdictLog(sidecar string) string {
	return k8srender.VerdictBegin + "\n" + base64.StdEncoding.EncodeToString([]byte(sidecar)) + "\n" + k8srender.VerdictEnd + "\n"
}

const k8sConfigHead = `
engine "kubernetes" {
  namespace          = "agents"
  git_secret         = "kewplan-git"
  credentials_secret = "agent-keys"
}
sandbox {
  network = "open"
  images = {
    "claude-code" = "ghcr.io/kewplan/kew-agent@sha256:5a1b6c9a0d3e4f7081926354a7b8c9d0e1f2a3b4c5d6e7f8091a2b3c4d5e6f70"
  }
}
`

const k8sFixNode = `
node "fix" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  ref    = "main"
  branch = "kew/fix"
  prompt = "Fix the flaky test."
%s}
`

const k8sReviewNode = `
node "review" {
  runner     = "claude-code"
  role       = "reviewer"
  model      = "claude-sonnet-4-5"
  repo       = "https://github.com/acme/widgets.git"
  ref        = node.fix.commit
  prompt     = "Review ${node.fix.commit}."
  depends_on = [node.fix]
}
`

type k8sApply struct {
	sum      *ApplySummary
	err      error
	cluster  *k8sengine.Cluster
	stateDir string
	rec      *recorder
}

// applyK8s plans hcl and applies it on the simulated cluster.
func applyK8s(ctx context.Context, t *testing.T, k *kubelet, hcl string, tweak ...func(*ApplyOptions)) *k8sApply {
	t.Helper()
	return applyK8sConfig(ctx, t, k, k8sConfigHead+hcl, tweak...)
}

// applyK8sConfig plans the whole configuration src and applies it on the simulated cluster.
func applyK8sConfig(ctx context.Context, t *testing.T, k *kubelet, src string, tweak ...func(*ApplyOptions)) *k8sApply {
	t.Helper()
	cfg, p, dir := k8stest.PlanSource(t, src)
	cl := (&k8sengine.Cluster{API: k8stest.FakeAPI{CS: k.cs}, Namespace: k8sNamespace}).WithLogs(k.logs)
	out := &k8sApply{cluster: cl, stateDir: filepath.Join(dir, ".kewplan"), rec: &recorder{}}
	opts := ApplyOptions{Config: cfg, Plan: p, StateDir: out.stateDir, Hooks: []Hook{out.rec}, Parallelism: 4,
		Engine: kubernetes.New(kubernetes.Options{Engine: cfg.Engine(config.EngineKubernetes).Kubernetes, Cluster: cl})}
	for _, f := range tweak {
		f(&opts)
	}
	out.sum, out.err = Apply(ctx, opts)
	if out.err == nil {
		// Whatever happened, the run leaves nothing on the cluster.
		if left, err := cl.Remaining(context.Background(), out.sum.RunID); err != nil || len(left) != 0 {
			t.Errorf("after the apply the run still has %v (%v)", left, err)
		}
	}
	return out
}

// ledgerRow is the node's row as the ledger recorded it.
func (r *k8sApply) ledgerRow(t *testing.T, node string) ledger.NodeRecord {
	t.Helper()
	l, err := ledger.Open(statedir.Dir{Root: r.stateDir}.Ledger())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, nodes, err := l.Run(r.sum.RunID)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.Node == node {
			return n
		}
	}
	t.Fatalf("no ledger row for %s", node)
	return ledger.NodeRecord{}
}

const fixCommit = "3f1c2a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a"

// TestKubernetesWorkerAndReviewer: a worker's Job succeeds (its tokens metered from the claude-code stream in the
// pod's log, its commit from the push step), the reviewer is re-planned with that commit and approves from its
// verdict step's log; the ledger has both rows, the transcript is the stream, and nothing is left on the cluster.
func TestKubernetesWorkerAndReviewer(t *testing.T) {
	tool := stream(t, "claude-code", "tool")
	text := stream(t, "claude-code", "text")
	k := newKubelet(t, func(node string, attempt int) simRun {
		if node == "review" {
			return simRun{agentLog: text, verdictLog: verdictLog(`{"verdict":"approve","summary":"Looks right.","findings":[]}`)}
		}
		return simRun{agentLog: tool, commit: fixCommit}
	})
	r := applyK8s(context.Background(), t, k, fmt.Sprintf(k8sFixNode, "")+k8sReviewNode)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.sum.Status != ledger.RunSucceeded {
		t.Fatalf("run %s: %+v", r.sum.Status, r.sum.Nodes)
	}
	fix := r.ledgerRow(t, "fix")
	want := metered(t, "claude-code", "claude-sonnet-4-5", tool)
	if fix.Status != ledger.StatusSucceeded || fix.Commit != fixCommit || fix.Branch != "kew/fix" || !fix.Pushed {
		t.Errorf("fix: %s %q commit %q branch %q pushed %v", fix.Status, fix.Reason, fix.Commit, fix.Branch, fix.Pushed)
	}
	if fix.InputTokens != want.InputTokens || fix.OutputTokens != want.OutputTokens || fix.CacheReadTokens != want.CacheReadTokens || fix.InputTokens == 0 {
		t.Errorf("fix: tokens %d/%d/%d, want %d/%d/%d from the stream", fix.InputTokens, fix.OutputTokens, fix.CacheReadTokens, want.InputTokens, want.OutputTokens, want.CacheReadTokens)
	}
	if fix.SessionID != want.SessionID || fix.ExitCode == nil || *fix.ExitCode != 0 {
		t.Errorf("fix: session %q exit %v, want %q and 0", fix.SessionID, fix.ExitCode, want.SessionID)
	}
	// The host cannot inspect the cluster's images: the image id is the one the pod's status reports for the agent.
	if wantID := "resolved://" + fix.Image; fix.Image == "" || fix.ImageID != wantID {
		t.Errorf("fix: image %q, image id %q; want the pod's %q", fix.Image, fix.ImageID, wantID)
	}
	if got, err := os.ReadFile(fix.StdoutLog); err != nil || string(got) != tool {
		t.Errorf("fix: transcript %s differs from the agent's log (%v)", fix.StdoutLog, err)
	}
	review := r.ledgerRow(t, "review")
	if review.Status != ledger.StatusApproved || review.Verdict != "approve" || review.VerdictSummary != "Looks right." || review.SidecarSHA256 == "" {
		t.Errorf("review: %s %q verdict %q %q", review.Status, review.Reason, review.Verdict, review.VerdictSummary)
	}
	if review.Commit != fixCommit {
		t.Errorf("review: commit %q, want the reviewed %s", review.Commit, fixCommit)
	}
	// The reviewer's Job was rendered after re-planning with fix's commit.
	jobs := k.jobNames()
	if len(jobs) != 2 || !strings.HasPrefix(jobs[0], "kew-fix-") || !strings.HasPrefix(jobs[1], "kew-review-") {
		t.Errorf("Jobs created %v, want fix's then review's", jobs)
	}
	if len(r.rec.starts) != 2 || len(r.rec.done) != 2 {
		t.Errorf("hook: %d starts, %d done; want 2 and 2", len(r.rec.starts), len(r.rec.done))
	}
}

// TestKubernetesReviewerHeld: a verdict whose JSON is hostile (a duplicate key in another case, which
// encoding/json would let approve), a reviewer that wrote none and one whose sidecar is the one the repository
// carried (the verdict step exits ExitVerdictCommitted) are all held for a human, as on Docker.
func TestKubernetesReviewerHeld(t *testing.T) {
	for name, log := range map[string]string{
		"hostile": verdictLog(`{"verdict":"reject","VERDICT":"approve","summary":""}`),
		"missing": k8srender.VerdictMissing + "\n",
		"garbled": k8srender.VerdictBegin + "\n!!!not base64\n" + k8srender.VerdictEnd + "\n",
		"planted": "",
	} {
		t.Run(name, func(t *testing.T) {
			text := stream(t, "claude-code", "text")
			k := newKubelet(t, func(node string, attempt int) simRun {
				if node == "review" && name == "planted" {
					return simRun{agentLog: text, pushExit: k8srender.ExitVerdictCommitted}
				}
				if node == "review" {
					return simRun{agentLog: text, verdictLog: log}
				}
				return simRun{agentLog: text, commit: fixCommit}
			})
			r := applyK8s(context.Background(), t, k, fmt.Sprintf(k8sFixNode, "")+k8sReviewNode)
			if r.err != nil {
				t.Fatal(r.err)
			}
			review := r.ledgerRow(t, "review")
			if review.Status != ledger.StatusHeld || !strings.HasPrefix(review.Reason, "held for a human: ") || review.Verdict != "" {
				t.Errorf("review: %s %q verdict %q, want held", review.Status, review.Reason, review.Verdict)
			}
			if r.sum.Status != ledger.RunFailed {
				t.Errorf("run %s, want failed", r.sum.Status)
			}
		})
	}
}

// TestKubernetesAgentFails: the agent exits 1; the node fails with the status and the last line of the log's tail
// (the kubelet's termination message), nothing is pushed, and the reviewer is skipped.
func TestKubernetesAgentFails(t *testing.T) {
	log := stream(t, "claude-code", "text") + "Error: the repository has no tests to fix\n"
	k := newKubelet(t, func(node string, attempt int) simRun { return simRun{agentLog: log, agentExit: 1} })
	r := applyK8s(context.Background(), t, k, fmt.Sprintf(k8sFixNode, "")+k8sReviewNode)
	if r.err != nil {
		t.Fatal(r.err)
	}
	fix := r.ledgerRow(t, "fix")
	if fix.Status != ledger.StatusFailed || fix.Reason != "the agent exited with status 1: Error: the repository has no tests to fix" {
		t.Errorf("fix: %s %q", fix.Status, fix.Reason)
	}
	if fix.ExitCode == nil || *fix.ExitCode != 1 || fix.Pushed || fix.Commit != "" {
		t.Errorf("fix: exit %v pushed %v commit %q", fix.ExitCode, fix.Pushed, fix.Commit)
	}
	if review := r.ledgerRow(t, "review"); review.Status != ledger.StatusSkipped || !strings.Contains(review.Reason, `dependency "fix" failed`) {
		t.Errorf("review: %s %q", review.Status, review.Reason)
	}
}

// TestKubernetesPodSecurityRefusal: the Job controller cannot create the pod (Pod Security refused it), which shows
// only as a FailedCreate event: the node fails at once with the event's message, not at its deadline.
func TestKubernetesPodSecurityRefusal(t *testing.T) {
	const refusal = `Error creating: pods "kew-fix-x" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false`
	k := newKubelet(t, func(node string, attempt int) simRun { return simRun{refused: refusal} })
	r := applyK8s(context.Background(), t, k, fmt.Sprintf(k8sFixNode, ""))
	if r.err != nil {
		t.Fatal(r.err)
	}
	fix := r.ledgerRow(t, "fix")
	if fix.Status != ledger.StatusFailed || !strings.HasPrefix(fix.Reason, "the cluster refused to create the node's pod") || !strings.HasSuffix(fix.Reason, refusal) {
		t.Errorf("fix: %s %q", fix.Status, fix.Reason)
	}
}

// TestKubernetesBudgetKillDeletesTheJob: the agent keeps running after its stream crossed max_usd; kewplan deletes
// its Job (foreground) at once, and the node ends budget_exceeded with what it spent.
func TestKubernetesBudgetKillDeletesTheJob(t *testing.T) {
	tool := stream(t, "claude-code", "tool")
	k := newKubelet(t, func(node string, attempt int) simRun { return simRun{agentLog: tool, block: true} })
	var deletes []string
	var mu sync.Mutex
	k.cs.PrependReactor("delete", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		d := a.(k8stesting.DeleteAction)
		mu.Lock()
		defer mu.Unlock()
		if pp := d.GetDeleteOptions().PropagationPolicy; pp == nil || *pp != metav1.DeletePropagationForeground {
			t.Errorf("Job %s deleted without foreground propagation", d.GetName())
		}
		deletes = append(deletes, d.GetName())
		return false, nil, nil
	})
	r := applyK8s(context.Background(), t, k, fmt.Sprintf(k8sFixNode, "  budget {\n    max_usd = 0.005\n  }\n"))
	if r.err != nil {
		t.Fatal(r.err)
	}
	fix := r.ledgerRow(t, "fix")
	if fix.Status != ledger.StatusBudgetExceeded || !strings.Contains(fix.Reason, "max_usd") || !strings.HasSuffix(fix.Reason, "kewplan deleted its Job") {
		t.Errorf("fix: %s %q", fix.Status, fix.Reason)
	}
	if fix.CostUSD == nil || *fix.CostUSD < 0.005 {
		t.Errorf("fix: cost %v, want the reported cost past 0.005", fix.CostUSD)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(deletes) == 0 || !strings.HasPrefix(deletes[0], "kew-fix-") {
		t.Errorf("Job deletions %v, want fix's", deletes)
	}
}

// TestKubernetesApplyBudgetStopsTheGraph: the apply-wide max_usd on Kubernetes. Two agents spend until the run's
// total crosses the cap; both Jobs are deleted, both nodes end budget_exceeded by the apply's cap, the node waiting
// for one of them is skipped, the run fails with the stop recorded, and nothing of the run is left (applyK8s).
func TestKubernetesApplyBudgetStopsTheGraph(t *testing.T) {
	tool := stream(t, "claude-code", "tool")
	k := newKubelet(t, func(node string, attempt int) simRun { return simRun{agentLog: tool, block: true} })
	hcl := "budget {\n  max_usd = 0.005\n}\n" + fmt.Sprintf(k8sFixNode, "") +
		strings.ReplaceAll(fmt.Sprintf(k8sFixNode, ""), `node "fix"`, `node "docs"`) +
		strings.ReplaceAll(strings.ReplaceAll(fmt.Sprintf(k8sFixNode, ""), `node "fix"`, `node "after"`), `ref    = "main"`, `ref    = node.fix.branch`)
	r := applyK8s(context.Background(), t, k, hcl)
	if r.err != nil {
		t.Fatal(r.err)
	}
	for _, n := range []string{"fix", "docs"} {
		row := r.ledgerRow(t, n)
		if row.Status != ledger.StatusBudgetExceeded || !strings.Contains(row.Reason, "max_usd") {
			t.Errorf("%s: %s %q, want budget_exceeded by the apply's max_usd", n, row.Status, row.Reason)
		}
	}
	if after := r.ledgerRow(t, "after"); after.Status != ledger.StatusSkipped {
		t.Errorf("after: %s %q, want skipped", after.Status, after.Reason)
	}
	if r.sum.Status != ledger.RunFailed || r.sum.BudgetStop == nil || r.sum.BudgetStop.Scope != "apply" {
		t.Errorf("summary: %s, stop %+v; want failed with the apply's budget stop", r.sum.Status, r.sum.BudgetStop)
	}
	for _, e := range r.rec.events {
		if strings.HasPrefix(e, "start after") {
			t.Errorf("%s: a node started after the apply-wide cap was crossed", e)
		}
	}
}

// TestKubernetesCancelDeletesEverything: two agents run; the apply is cancelled; both nodes are recorded cancelled
// and every Job, pod, Secret and NetworkPolicy of the run is gone (applyK8s checks the cluster).
func TestKubernetesCancelDeletesEverything(t *testing.T) {
	text := stream(t, "claude-code", "text")
	k := newKubelet(t, func(node string, attempt int) simRun { return simRun{agentLog: text, block: true} })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	two := fmt.Sprintf(k8sFixNode, "") + strings.ReplaceAll(fmt.Sprintf(k8sFixNode, ""), `node "fix"`, `node "docs"`)
	var during []string
	go func() {
		<-k.opened
		<-k.opened
		// Both agents run: their objects exist now.
		cl := &k8sengine.Cluster{API: k8stest.FakeAPI{CS: k.cs}, Namespace: k8sNamespace}
		orphans, err := cl.Orphans(context.Background())
		if err == nil {
			for _, objs := range orphans {
				during = append(during, objs...)
			}
		}
		cancel()
	}()
	r := applyK8s(ctx, t, k, two)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.sum.Status != ledger.RunCancelled {
		t.Errorf("run %s, want cancelled", r.sum.Status)
	}
	for _, n := range []string{"fix", "docs"} {
		if row := r.ledgerRow(t, n); row.Status != ledger.StatusCancelled {
			t.Errorf("%s: %s %q, want cancelled", n, row.Status, row.Reason)
		}
	}
	kinds := map[string]int{}
	for _, o := range during {
		kind, _, _ := strings.Cut(o, "/")
		kinds[kind]++
	}
	if kinds["Job"] != 2 || kinds["Pod"] != 2 || kinds["Secret"] != 2 || kinds["NetworkPolicy"] != 1 {
		t.Errorf("objects while the agents ran: %v, want 2 Jobs, 2 pods, 2 Secrets, 1 NetworkPolicy", during)
	}
}

// TestKubernetesRetryIsAFreshJob: the first attempt hits the Job's deadline (timed_out, a retryable class); the
// retry is a second Job with an attempt suffix, which succeeds; the ledger has both attempts.
func TestKubernetesRetryIsAFreshJob(t *testing.T) {
	text := stream(t, "claude-code", "text")
	k := newKubelet(t, func(node string, attempt int) simRun {
		if attempt == 1 {
			return simRun{agentLog: text, deadline: true}
		}
		return simRun{agentLog: text, commit: fixCommit}
	})
	retry := "  retry {\n    attempts = 2\n    backoff  = \"1s\"\n    on       = [\"timeout\"]\n  }\n"
	r := applyK8s(context.Background(), t, k, fmt.Sprintf(k8sFixNode, retry), func(o *ApplyOptions) {
		o.retrySleep = func(context.Context, time.Duration) error { return nil }
	})
	if r.err != nil {
		t.Fatal(r.err)
	}
	fix := r.ledgerRow(t, "fix")
	if fix.Status != ledger.StatusSucceeded || fix.Commit != fixCommit {
		t.Errorf("fix: %s %q commit %q", fix.Status, fix.Reason, fix.Commit)
	}
	jobs := k.jobNames()
	if len(jobs) != 2 || jobs[1] != jobs[0]+"-a2" {
		t.Errorf("Jobs %v, want the first and a fresh one suffixed -a2", jobs)
	}
	l, err := ledger.Open(statedir.Dir{Root: r.stateDir}.Ledger())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	attempts, err := l.Attempts(r.sum.RunID)
	if err != nil {
		t.Fatal(err)
	}
	a := attempts["fix"]
	if len(a) != 2 || a[0].Status != ledger.StatusTimedOut || a[0].StopClass != config.RetryOnTimeout || a[1].Status != ledger.StatusSucceeded {
		t.Errorf("attempts %+v, want timed_out (timeout) then succeeded", a)
	}
}

// TestKubernetesPreflight: a missing git Secret stops the run before any Job; a namespace that does not enforce
// Pod Security restricted is a warning that travels with the run's start.
func TestKubernetesPreflight(t *testing.T) {
	k := newKubelet(t, func(string, int) simRun { return simRun{} })
	if err := k.cs.CoreV1().Secrets(k8sNamespace).Delete(context.Background(), "kewplan-git", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	r := applyK8s(context.Background(), t, k, fmt.Sprintf(k8sFixNode, ""))
	var pe *PreflightError
	if r.err == nil || !errorAs(r.err, &pe) || !strings.Contains(pe.Error(), `Secret "kewplan-git" does not exist`) {
		t.Fatalf("Apply() error = %v, want a preflight error naming the git Secret", r.err)
	}
	if jobs := k.jobNames(); len(jobs) != 0 {
		t.Errorf("Jobs created before preflight passed: %v", jobs)
	}
}

func errorAs(err error, target **PreflightError) bool {
	pe, ok := err.(*PreflightError)
	if ok {
		*target = pe
	}
	return ok
}

// TestKubernetesPushStep: the push step refusing a committed prompt file or verdict sidecar holds the node (the
// scripts' own test, k8srender's TestPushStepRefusesPlantedFiles, runs them against real repositories); a push
// step that ends without reporting its commit fails it; none records a push.
func TestKubernetesPushStep(t *testing.T) {
	text := stream(t, "claude-code", "text")
	for name, tc := range map[string]struct {
		sim            simRun
		status, reason string
	}{
		"prompt committed": {simRun{agentLog: text, pushExit: k8srender.ExitPromptCommitted}, ledger.StatusHeld, "held for a human: the agent committed .kew-prompt.txt, so the push step refused to push"},
		"sidecar committed": {simRun{agentLog: text, pushExit: k8srender.ExitVerdictCommitted}, ledger.StatusHeld,
			"held for a human: the agent committed a reviewer sidecar .kew-review-verdict.json, which a downstream reviewer would read as its verdict, so the push step refused to push"},
		"no commit": {simRun{agentLog: text, commit: "not-a-commit"}, ledger.StatusFailed, "the agent succeeded but its commits may not be published: the push step ended without the commit it pushed in its termination message"},
	} {
		t.Run(name, func(t *testing.T) {
			k := newKubelet(t, func(string, int) simRun { return tc.sim })
			r := applyK8s(context.Background(), t, k, fmt.Sprintf(k8sFixNode, ""))
			if r.err != nil {
				t.Fatal(r.err)
			}
			fix := r.ledgerRow(t, "fix")
			if fix.Status != tc.status || fix.Reason != tc.reason || fix.Pushed || fix.Commit != "" {
				t.Errorf("fix: %s %q pushed %v commit %q; want %s %q", fix.Status, fix.Reason, fix.Pushed, fix.Commit, tc.status, tc.reason)
			}
		})
	}
}

// TestKubernetesOutputLimit: an agent whose log passes the output limit has its Job deleted at once and fails; the
// rest of its output is discarded.
func TestKubernetesOutputLimit(t *testing.T) {
	tool := stream(t, "claude-code", "tool")
	k := newKubelet(t, func(string, int) simRun { return simRun{agentLog: tool, block: true} })
	r := applyK8s(context.Background(), t, k, fmt.Sprintf(k8sFixNode, ""), func(o *ApplyOptions) { o.MaxOutputBytes = 1024 })
	if r.err != nil {
		t.Fatal(r.err)
	}
	fix := r.ledgerRow(t, "fix")
	if fix.Status != ledger.StatusFailed || fix.Reason != "the agent wrote more than 1024 bytes on its log; its Job was deleted and the rest of its output discarded" {
		t.Errorf("fix: %s %q", fix.Status, fix.Reason)
	}
	if got, err := os.ReadFile(fix.StdoutLog); err != nil || len(got) > 1024 {
		t.Errorf("transcript holds %d bytes (%v), want at most the 1024 of the limit", len(got), err)
	}
}

// TestKubernetesSweepsDeadRuns: objects of a run this state directory's ledger knows (kewplan was killed: the run
// is still "running" there, and this apply holds the lock) are deleted before the first Job, with a warning;
// objects of a run the ledger does not know (another state directory's) are left alone.
func TestKubernetesSweepsDeadRuns(t *testing.T) {
	const dead, stranger = "20260101T000000Z-dead00", "20260101T000000Z-other0"
	stateDir := t.TempDir()
	l, err := ledger.Open(statedir.Dir{Root: stateDir}.Ledger())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.StartRun(ledger.RunRecord{ID: dead, StartedAt: time.Now().Add(-time.Hour), PID: 1 << 30}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	text := stream(t, "claude-code", "text")
	k := newKubelet(t, func(string, int) simRun { return simRun{agentLog: text, commit: fixCommit} })
	cl := &k8sengine.Cluster{API: k8stest.FakeAPI{CS: k.cs}, Namespace: k8sNamespace}
	cfg, p, ok := k8stest.Plan(t, "../examples/kubernetes.hcl")
	if !ok {
		t.Fatal("examples/kubernetes.hcl does not plan")
	}
	for _, run := range []string{dead, stranger} {
		m, diags := k8srender.Render(p, k8srender.Options{Engine: k8stest.Engine(cfg, k8sNamespace), RunID: run, NameSuffix: strings.ToLower(run)})
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		if err := cl.Apply(context.Background(), m.All()); err != nil {
			t.Fatal(err)
		}
	}
	r := applyK8s(context.Background(), t, k, fmt.Sprintf(k8sFixNode, ""), func(o *ApplyOptions) { o.StateDir = stateDir })
	if r.err != nil {
		t.Fatal(r.err)
	}
	if left, err := cl.Remaining(context.Background(), dead); err != nil || len(left) != 0 {
		t.Errorf("the dead run still has %v (%v)", left, err)
	}
	if left, err := cl.Remaining(context.Background(), stranger); err != nil || len(left) != 5 {
		t.Errorf("the other state directory's run has %v (%v), want its 5 objects untouched", left, err)
	}
	swept := 0
	for _, w := range r.rec.warnings {
		if strings.HasPrefix(w.Message, "removed "+dead+": ") {
			swept++
		}
	}
	if swept != 5 {
		t.Errorf("warnings %+v, want one per swept object of %s", r.rec.warnings, dead)
	}
}

// TestKubernetesResume: the reviewer of a run was held; apply --resume reuses the worker (no Job for it) and runs
// only the reviewer again, on the recorded commit.
func TestKubernetesResume(t *testing.T) {
	text := stream(t, "claude-code", "text")
	k := newKubelet(t, func(node string, attempt int) simRun {
		switch {
		case node == "fix":
			return simRun{agentLog: text, commit: fixCommit}
		case attempt == 1:
			return simRun{agentLog: text, verdictLog: k8srender.VerdictMissing + "\n"}
		}
		return simRun{agentLog: text, verdictLog: verdictLog(`{"verdict":"approve","summary":"Now it is there."}`)}
	})
	// An unreachable repository: resume's check of the pushed branch cannot look, and is skipped.
	hcl := strings.ReplaceAll(fmt.Sprintf(k8sFixNode, "")+k8sReviewNode, "https://github.com/acme/widgets.git", "https://example.invalid/widgets.git")
	stateDir := t.TempDir()
	first := applyK8s(context.Background(), t, k, hcl, func(o *ApplyOptions) { o.StateDir = stateDir })
	if first.err != nil {
		t.Fatal(first.err)
	}
	if got := resultOf(t, first.sum, "review").Status; got != ledger.StatusHeld {
		t.Fatalf("first run: review %s, want held", got)
	}
	jobsBefore := len(k.jobNames())
	second := applyK8s(context.Background(), t, k, hcl, func(o *ApplyOptions) {
		o.StateDir = stateDir
		prev, err := LoadPreviousRun(context.Background(), statedir.Dir{Root: stateDir}, first.sum.RunID, o.Plan, o.Config.Dir)
		if err != nil {
			t.Fatal(err)
		}
		in := planner.Inputs{Vars: o.Vars, FS: config.DirFS(o.Config.Dir)}
		o.Resume = planner.Resume(o.Plan, prev, func(name string, outs map[string]map[string]cty.Value) (*planner.NodePlan, error) {
			np, diags := planner.RenderNode(o.Config, in, name, outs)
			if diags.HasErrors() {
				return nil, fmt.Errorf("%s", config.DiagnosticsText(diags))
			}
			return np, nil
		})
	})
	if second.err != nil {
		t.Fatal(second.err)
	}
	fix, review := resultOf(t, second.sum, "fix"), resultOf(t, second.sum, "review")
	if fix.ReusedFrom != first.sum.RunID || fix.Commit != fixCommit {
		t.Errorf("fix: %s reused from %q commit %q, want reused from %s", fix.Status, fix.ReusedFrom, fix.Commit, first.sum.RunID)
	}
	if review.Status != ledger.StatusApproved || review.Commit != fixCommit {
		t.Errorf("review: %s %q commit %q, want approved on %s", review.Status, review.Reason, review.Commit, fixCommit)
	}
	jobs := k.jobNames()[jobsBefore:]
	if len(jobs) != 1 || !strings.HasPrefix(jobs[0], "kew-review-") {
		t.Errorf("Jobs of the resumed run %v, want only review's", jobs)
	}
}

// TestKubernetesPreflightWarning: a namespace that does not enforce Pod Security restricted does not stop the run;
// the warning travels with its start, as Docker's environment warnings do.
func TestKubernetesPreflightWarning(t *testing.T) {
	text := stream(t, "claude-code", "text")
	k := newKubelet(t, func(string, int) simRun { return simRun{agentLog: text, commit: fixCommit} })
	ns, err := k.cs.CoreV1().Namespaces().Get(context.Background(), k8sNamespace, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	delete(ns.Labels, "pod-security.kubernetes.io/enforce")
	if _, err := k.cs.CoreV1().Namespaces().Update(context.Background(), ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	sr := &startRecorder{}
	r := applyK8s(context.Background(), t, k, fmt.Sprintf(k8sFixNode, ""), withStartRecorder(sr))
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.sum.Status != ledger.RunSucceeded {
		t.Errorf("run %s, want succeeded", r.sum.Status)
	}
	if w := sr.text(); !strings.HasPrefix(w, `The namespace "agents" enforces Pod Security none (the cluster default), not restricted`) || strings.Contains(w, "\n") {
		t.Errorf("start warnings %q, want the Pod Security one", w)
	}
}

// TestKubernetesPreflightCredentials: a node whose runner finds none of its credentials in the credentials Secret
// stops the run before any Job, naming the Secret and the keys it could hold, never a value.
func TestKubernetesPreflightCredentials(t *testing.T) {
	k := newKubelet(t, func(string, int) simRun { return simRun{} })
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "agent-keys", Namespace: k8sNamespace}, Data: map[string][]byte{"OPENROUTER_API_KEY": []byte("s3cret-other")}}
	if _, err := k.cs.CoreV1().Secrets(k8sNamespace).Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := applyK8s(context.Background(), t, k, fmt.Sprintf(k8sFixNode, ""))
	pe, ok := r.err.(*PreflightError)
	if !ok || len(pe.Problems) != 1 || !strings.HasPrefix(pe.Problems[0], `node "fix": none of runner "claude-code"'s credentials is a key of the Secret "agent-keys" (ANTHROPIC_API_KEY, CLAUDE_CODE_OAUTH_TOKEN)`) {
		t.Fatalf("Apply() error = %v, want the credentials problem", r.err)
	}
	if strings.Contains(pe.Error(), "s3cret") {
		t.Errorf("the preflight error leaks a Secret value: %v", pe)
	}
	if jobs := k.jobNames(); len(jobs) != 0 {
		t.Errorf("Jobs created before preflight passed: %v", jobs)
	}
}
