package k8sengine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kewplan/kewplan/internal/testtools/k8stest"
	"github.com/kewplan/kewplan/k8sengine"
	"github.com/kewplan/kewplan/k8srender"
)

// The end-to-end tests run against a real kube-apiserver (with etcd and kube-controller-manager) started on
// loopback from the binaries `make k8s-test` builds, or against the cluster of KEWPLAN_K8S_E2E_CONTEXT. There is
// no kubelet here, so a pod is admitted and created but never runs; what a running pod does is tested against
// recorded API objects (status_test.go).

func TestMain(m *testing.M) {
	code := m.Run()
	k8stest.Stop()
	os.Exit(code)
}

func e2eTimeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestE2EExamplesAccepted: every object rendered from every example that plans cleanly is accepted by the real
// API server with server-side apply, in a namespace that enforces Pod Security "restricted", and a server-side
// dry run of each Job's pod is admitted too (a Job itself is admitted whatever its pod template says).
func TestE2EExamplesAccepted(t *testing.T) {
	cl := k8stest.Start(t)
	ctx := e2eTimeout(t)
	ns := cl.Namespace(t)
	c := cl.Kewplan(t, ns)
	rendered := 0
	for _, ex := range k8stest.Examples(t, "..") {
		cfg, p, ok := k8stest.Plan(t, ex)
		if !ok {
			continue
		}
		run := strings.TrimSuffix(filepath.Base(ex), ".hcl")
		e := k8stest.Engine(cfg, ns)
		e.RuntimeClass = "" // no RuntimeClass is installed in the test control plane
		m, diags := k8srender.Render(p, k8srender.Options{Engine: e, RunID: run, NameSuffix: run})
		if diags.HasErrors() {
			t.Fatalf("Render(%s): %v", ex, diags)
		}
		if err := c.Apply(ctx, m.All()); err != nil {
			t.Errorf("%s: %v", ex, err)
			continue
		}
		for _, n := range m.Nodes {
			p := podOf(n.Job, ns)
			if _, err := cl.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
				t.Errorf("%s: the pod of node %s is refused: %v", ex, n.Node, err)
			}
			rendered++
		}
		if err := c.DeleteRun(ctx, run); err != nil {
			t.Error(err)
		}
	}
	if rendered == 0 {
		t.Fatal("no example rendered a node")
	}
	t.Logf("%d nodes of the examples accepted under Pod Security restricted", rendered)
}

// podOf is the pod the Job controller would create from the Job's template.
func podOf(job *batchv1.Job, ns string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-probe", Namespace: ns, Labels: job.Spec.Template.Labels},
		Spec:       *job.Spec.Template.Spec.DeepCopy(),
	}
}

// TestE2EWeakenedPodRefused: admission refuses a pod that drops one piece of the hardening, for each piece.
func TestE2EWeakenedPodRefused(t *testing.T) {
	cl := k8stest.Start(t)
	ctx := e2eTimeout(t)
	ns := cl.Namespace(t)
	m := renderExample(t, ns, "weak")
	for _, tc := range []struct {
		name   string
		weaken func(*corev1.PodSpec)
		want   string
	}{
		{"allowPrivilegeEscalation", func(s *corev1.PodSpec) { s.InitContainers[1].SecurityContext.AllowPrivilegeEscalation = nil }, "allowPrivilegeEscalation != false"},
		{"capabilities", func(s *corev1.PodSpec) { s.InitContainers[1].SecurityContext.Capabilities = nil }, "unrestricted capabilities"},
		{"runAsNonRoot", func(s *corev1.PodSpec) {
			s.SecurityContext.RunAsNonRoot = nil
			for i := range s.InitContainers {
				s.InitContainers[i].SecurityContext.RunAsNonRoot = nil
			}
			for i := range s.Containers {
				s.Containers[i].SecurityContext.RunAsNonRoot = nil
			}
		}, "runAsNonRoot != true"},
		{"seccompProfile", func(s *corev1.PodSpec) {
			s.SecurityContext.SeccompProfile = nil
			s.InitContainers[1].SecurityContext.SeccompProfile = nil
		}, "seccompProfile"},
		{"hostPath", func(s *corev1.PodSpec) {
			s.Volumes[0].VolumeSource = corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}
		}, "hostPath"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := podOf(m.Nodes[0].Job, ns)
			p.Name = "weak-" + strings.ToLower(tc.name)
			tc.weaken(&p.Spec)
			_, err := cl.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "violates PodSecurity") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Create(weakened pod) = %v, want 403 violates PodSecurity ... %s", err, tc.want)
			}
		})
	}
}

func renderExample(t *testing.T, ns, run string) *k8srender.Manifests {
	t.Helper()
	cfg, p, ok := k8stest.Plan(t, "../examples/kubernetes.hcl")
	if !ok {
		t.Fatal("examples/kubernetes.hcl does not plan")
	}
	e := k8stest.Engine(cfg, ns)
	e.RuntimeClass = ""
	m, diags := k8srender.Render(p, k8srender.Options{Engine: e, RunID: run, NameSuffix: run})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	return m
}

// TestE2EJobControllerAndCancel: with the Job controller running, the rendered Job's pod is created (it passed
// restricted admission); a Job with a violating template gets FailedCreate events and no pod, which Observe
// reports as failed; and cancellation (foreground deletion) leaves no object of the run behind.
func TestE2EJobControllerAndCancel(t *testing.T) {
	cl := k8stest.Start(t)
	if !cl.Controllers {
		t.Skip("no controller manager")
	}
	ctx := e2eTimeout(t)
	ns := cl.Namespace(t)
	c := cl.Kewplan(t, ns)
	m := renderExample(t, ns, "good")
	if err := c.Apply(ctx, m.All()); err != nil {
		t.Fatal(err)
	}
	fix := m.Nodes[0].Job.Name
	// The Job controller creates the pod; without a kubelet it stays pending.
	var created *corev1.Pod
	poll(ctx, t, "the Job controller creates the pod of "+fix, func() (bool, error) {
		pods, err := cl.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + fix})
		if err != nil || len(pods.Items) == 0 {
			return false, err
		}
		created = &pods.Items[0]
		return true, nil
	})
	if created.Labels[k8srender.LabelRun] != "good" || created.Spec.SecurityContext == nil || *created.Spec.AutomountServiceAccountToken {
		t.Errorf("created pod: labels %v", created.Labels)
	}
	if o, err := c.Observe(ctx, fix); err != nil || o.Phase != k8sengine.PhasePending {
		t.Errorf("Observe(%s) = %+v, %v; want pending (no kubelet)", fix, o, err)
	}

	// A violating template: the Job is admitted (with a warning), its pod is refused.
	bad := renderExample(t, ns, "bad")
	badJob := bad.Nodes[0].Job
	badJob.Spec.Template.Spec.InitContainers[1].SecurityContext.AllowPrivilegeEscalation = ptr(true)
	if err := c.Apply(ctx, bad.All()); err != nil {
		t.Fatalf("apply the violating Job: %v", err)
	}
	poll(ctx, t, "FailedCreate events on "+badJob.Name, func() (bool, error) {
		o, err := c.Observe(ctx, badJob.Name)
		if err != nil {
			return false, err
		}
		if o.Phase == k8sengine.PhaseFailed {
			if o.Reason != "FailedCreate" || !strings.Contains(o.Message, "violates PodSecurity") {
				return false, errors.New("failed for another reason: " + o.Reason + ": " + o.Message)
			}
			return true, nil
		}
		return false, nil
	})

	// Cancellation: foreground deletion of everything of both runs, and nothing left.
	for _, run := range []string{"good", "bad"} {
		if err := c.DeleteRun(ctx, run); err != nil {
			t.Fatal(err)
		}
	}
	for _, run := range []string{"good", "bad"} {
		poll(ctx, t, "nothing of run "+run+" left", func() (bool, error) {
			left, err := c.Remaining(ctx, run)
			return len(left) == 0, err
		})
	}
}

// poll waits for cond by asking the API server again (the state changes in another process; there is nothing to
// wait on but the API), failing the test at ctx's deadline.
func poll(ctx context.Context, t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) { return cond() })
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func ptr[T any](v T) *T { return &v }
