package k8sengine_test

import (
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kewplan/kewplan/internal/testtools/k8stest"
	"github.com/kewplan/kewplan/k8sengine"
	"github.com/kewplan/kewplan/k8srender"
)

func manifests(t *testing.T, run string) *k8srender.Manifests {
	t.Helper()
	cfg, p, ok := k8stest.Plan(t, "../examples/kubernetes.hcl")
	if !ok {
		t.Fatal("examples/kubernetes.hcl does not plan")
	}
	m, diags := k8srender.Render(p, k8srender.Options{Engine: k8stest.Engine(cfg, "agents"), RunID: run, NameSuffix: run})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return m
}

// TestApplyDeleteSweep: server-side apply of a run's objects, the orphan listing by labels, and deletion of one
// run that leaves the other alone (against the fake clientset, which keeps objects and field managers).
func TestApplyDeleteSweep(t *testing.T) {
	ctx := context.Background()
	c := &k8sengine.Cluster{API: k8stest.Fake(), Namespace: "agents"}
	for _, run := range []string{"r1", "r2"} {
		if err := c.Apply(ctx, manifests(t, run).All()); err != nil {
			t.Fatal(err)
		}
	}
	// Applying again is idempotent (server-side apply).
	if err := c.Apply(ctx, manifests(t, "r1").All()); err != nil {
		t.Fatalf("second apply: %v", err)
	}
	orphans, err := c.Orphans(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"Job/kew-fix-r1", "Job/kew-review-r1", "NetworkPolicy/kewplan-egress-r1", "Secret/kew-fix-r1-prompt", "Secret/kew-review-r1-prompt"}
	got := append([]string(nil), orphans["r1"]...)
	sort.Strings(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Orphans()[r1] mismatch (-want +got):\n%s", diff)
	}
	swept, err := c.Sweep(ctx, func(run string) bool { return run == "r2" })
	if err != nil {
		t.Fatal(err)
	}
	if len(swept) != 5 {
		t.Errorf("Sweep() = %v, want the 5 objects of r1", swept)
	}
	if left, _ := c.Remaining(ctx, "r1"); len(left) != 0 {
		t.Errorf("after the sweep r1 still has %v", left)
	}
	if left, _ := c.Remaining(ctx, "r2"); len(left) != 5 {
		t.Errorf("the sweep touched the live run r2: %v", left)
	}
}

func TestPreflight(t *testing.T) {
	restricted := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "agents", Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}
	baseline := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "agents", Labels: map[string]string{"pod-security.kubernetes.io/enforce": "baseline"}}}
	git := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kewplan-git", Namespace: "agents"}, Data: map[string][]byte{"token": []byte("s3cret-git")}}
	gitNoToken := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kewplan-git", Namespace: "agents"}, Data: map[string][]byte{"password": []byte("s3cret-git")}}
	keys := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "agent-keys", Namespace: "agents"}, Data: map[string][]byte{"ANTHROPIC_API_KEY": []byte("s3cret-key")}}
	gvisor := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "gvisor"}, Handler: "runsc"}
	creds := []string{"ANTHROPIC_API_KEY", "OPENROUTER_API_KEY"}
	for _, tc := range []struct {
		name           string
		objs           []runtime.Object
		runtimeClass   string
		errors, warned []string // substrings, in order
	}{
		{name: "ready", objs: []runtime.Object{restricted, git, keys, gvisor}, runtimeClass: "gvisor",
			warned: []string{`no key "OPENROUTER_API_KEY"`}},
		{name: "nothing there", objs: nil, runtimeClass: "gvisor",
			errors: []string{`namespace "agents" does not exist`, `Secret "kewplan-git" does not exist`, `Secret "agent-keys" does not exist`, `RuntimeClass "gvisor" does not exist`}},
		{name: "weaker namespace, git Secret without token", objs: []runtime.Object{baseline, gitNoToken, keys},
			errors: []string{`"kewplan-git" has no key "token"`},
			warned: []string{`enforces Pod Security baseline, not restricted`, `no key "OPENROUTER_API_KEY"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &k8sengine.Cluster{API: k8stest.Fake(tc.objs...), Namespace: "agents"}
			e := k8stest.TestEngine("agents")
			e.RuntimeClass = tc.runtimeClass
			r, err := c.Preflight(context.Background(), e, creds)
			if err != nil {
				t.Fatal(err)
			}
			check := func(what string, got, want []string) {
				if len(got) != len(want) {
					t.Errorf("%s = %q, want %d matching %q", what, got, len(want), want)
					return
				}
				for i := range want {
					if !strings.Contains(got[i], want[i]) {
						t.Errorf("%s[%d] = %q, want it to contain %q", what, i, got[i], want[i])
					}
				}
				for _, g := range got {
					if strings.Contains(g, "s3cret") {
						t.Errorf("%s leaks a Secret value: %q", what, g)
					}
				}
			}
			check("Errors", r.Errors, tc.errors)
			check("Warnings", r.Warnings, tc.warned)
		})
	}
}

// TestApplyDeleteSharedKinds: the kinds the run's shared objects may hold (the egress proxy's Deployment, Service
// and ConfigMap) are applied, found by the run's labels and deleted with it.
func TestApplyDeleteSharedKinds(t *testing.T) {
	ctx := context.Background()
	c := &k8sengine.Cluster{API: k8stest.Fake(), Namespace: "agents"}
	labels := map[string]string{k8srender.LabelManagedBy: k8srender.ManagedBy, k8srender.LabelRun: "r1"}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: "agents", Labels: labels}
	}
	objs := []k8srender.Object{
		&corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: meta("proxy-config"), Data: map[string]string{"allow": "api.anthropic.com"}},
		&corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}, ObjectMeta: meta("proxy")},
		&appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}, ObjectMeta: meta("proxy")},
	}
	if err := c.Apply(ctx, objs); err != nil {
		t.Fatal(err)
	}
	got, err := c.Remaining(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(got)
	if diff := cmp.Diff([]string{"ConfigMap/proxy-config", "Deployment/proxy", "Service/proxy"}, got); diff != "" {
		t.Errorf("Remaining() mismatch (-want +got):\n%s", diff)
	}
	if err := c.DeleteRun(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	if left, _ := c.Remaining(ctx, "r1"); len(left) != 0 {
		t.Errorf("after DeleteRun: %v", left)
	}
}

// TestObserveAgentStep: Observe reads, besides the outcome, the newest pod's agent step: its exit status once it
// ended and the image the runtime resolved for it, which apply records as the node's image id.
func TestObserveAgentStep(t *testing.T) {
	const imageID = "docker.io/acme/kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4"
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "kew-fix-r1", Namespace: "agents"}}
	running := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "kew-fix-r1-abcde", Namespace: "agents",
			Labels: map[string]string{"batch.kubernetes.io/job-name": "kew-fix-r1"}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{
			{Name: k8srender.StepClone, ImageID: "sha256:clone", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}},
			{Name: k8srender.StepAgent, ImageID: imageID, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
		}},
	}
	c := &k8sengine.Cluster{API: k8stest.Fake(job, running), Namespace: "agents"}
	o, err := c.Observe(context.Background(), "kew-fix-r1")
	if err != nil {
		t.Fatal(err)
	}
	if o.Pod != running.Name || o.AgentImageID != imageID || o.AgentExit != nil {
		t.Errorf("running agent: pod %q, image id %q, exit %v; want %q, %q, none", o.Pod, o.AgentImageID, o.AgentExit, running.Name, imageID)
	}

	ended := running.DeepCopy()
	ended.Status.InitContainerStatuses[1].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3}}
	c = &k8sengine.Cluster{API: k8stest.Fake(job, ended), Namespace: "agents"}
	if o, err = c.Observe(context.Background(), "kew-fix-r1"); err != nil {
		t.Fatal(err)
	}
	if o.AgentImageID != imageID || o.AgentExit == nil || *o.AgentExit != 3 {
		t.Errorf("ended agent: image id %q, exit %v; want %q, 3", o.AgentImageID, o.AgentExit, imageID)
	}
}

// TestServiceClusterIP: the proxy's address is its Service's cluster IP; a headless Service, one without an
// address, and a missing one are errors that name the Service.
func TestServiceClusterIP(t *testing.T) {
	svc := func(name, ip string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "proxy"}, Spec: corev1.ServiceSpec{ClusterIP: ip}}
	}
	c := &k8sengine.Cluster{API: k8stest.Fake(svc("v4", "10.96.0.10"), svc("v6", "fd00::10"), svc("headless", "None"), svc("none", "")), Namespace: "agents"}
	for name, want := range map[string]string{"v4": "10.96.0.10", "v6": "fd00::10", "headless": "", "none": "", "missing": ""} {
		got, err := c.ServiceClusterIP(context.Background(), "proxy", name)
		if got != want || (want == "") != (err != nil) {
			t.Errorf("ServiceClusterIP(%s) = %q, %v; want %q", name, got, err, want)
		}
		if err != nil && !strings.Contains(err.Error(), "proxy/"+name) {
			t.Errorf("ServiceClusterIP(%s): %v does not name the Service", name, err)
		}
	}
}
