package executor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/executor/kubernetes"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/internal/testtools/k8stest"
	"github.com/kewplan/kewplan/k8srender"
)

func TestMain(m *testing.M) {
	code := m.Run()
	k8stest.Stop() // the control plane k8stest.Start started, if any
	os.Exit(code)
}

// TestKubernetesE2EApplyCancel: `apply` on a real API server (the binaries of `make k8s-test`, or the cluster of
// KEWPLAN_K8S_E2E_CONTEXT; skipped without either): preflight passes, the node's Secret and Job are created by
// server-side apply, the Job controller creates its pod (admitted under Pod Security restricted; no kubelet runs it),
// and cancelling the apply records the node cancelled and leaves no object of the run.
func TestKubernetesE2EApplyCancel(t *testing.T) {
	cl := k8stest.Start(t)
	ctx, stop := context.WithTimeout(context.Background(), 3*time.Minute)
	defer stop()
	ns := cl.Namespace(t)
	for name, key := range map[string]string{"kewplan-git": "token", "agent-keys": "ANTHROPIC_API_KEY"} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string][]byte{key: []byte("s3cret")}}
		if _, err := cl.Client.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	hcl := strings.Replace(k8sConfigHead, `namespace          = "agents"`, `namespace          = "`+ns+`"`, 1) + strings.Replace(k8sFixNode, "%s", "  timeout = \"2m\"\n", 1)
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(hcl), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, p, ok := k8stest.Plan(t, dir)
	if !ok {
		t.Fatal("the test configuration does not plan")
	}
	c := cl.Kewplan(t, ns)
	applyCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		sum *ApplySummary
		err error
	}
	done := make(chan result, 1)
	go func() {
		sum, err := Apply(applyCtx, ApplyOptions{Config: cfg, Plan: p, StateDir: filepath.Join(dir, ".kewplan"), Hooks: []Hook{&recorder{}},
			Engine: kubernetes.New(kubernetes.Options{Engine: cfg.Engine(config.EngineKubernetes).Kubernetes, Cluster: c})})
		done <- result{sum, err}
	}()
	managed := metav1.ListOptions{LabelSelector: k8srender.LabelManagedBy + "=" + k8srender.ManagedBy}
	poll := func(what string, cond func() (bool, error)) {
		t.Helper()
		if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) { return cond() }); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	poll("the node's Job is created", func() (bool, error) {
		jobs, err := cl.Client.BatchV1().Jobs(ns).List(ctx, managed)
		return err == nil && len(jobs.Items) == 1, err
	})
	if cl.Controllers {
		poll("the Job controller creates the pod", func() (bool, error) {
			pods, err := cl.Client.CoreV1().Pods(ns).List(ctx, managed)
			return err == nil && len(pods.Items) == 1, err
		})
	}
	cancel()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.sum.Status != ledger.RunCancelled || len(r.sum.Nodes) != 1 || r.sum.Nodes[0].Status != ledger.StatusCancelled {
		t.Errorf("run %s, nodes %+v; want cancelled", r.sum.Status, r.sum.Nodes)
	}
	if cl.Controllers {
		// Foreground deletion finishes when the garbage collector has removed the pods.
		poll("nothing of the run left", func() (bool, error) {
			left, err := c.Remaining(ctx, r.sum.RunID)
			return len(left) == 0, err
		})
	}
}

// TestKubernetesE2EProxyByClusterIP: with kewplan's egress proxy, apply on a real API server creates the proxy's
// Service, reads the cluster IP the API server allocated and renders it into the proxy URLs the node's pod reads;
// the pod has no DNS, and the run's NetworkPolicy has no rule for it.
func TestKubernetesE2EProxyByClusterIP(t *testing.T) {
	cl := k8stest.Start(t)
	ctx, stop := context.WithTimeout(context.Background(), 3*time.Minute)
	defer stop()
	ns := cl.Namespace(t)
	for name, key := range map[string]string{"kewplan-git": "token", "agent-keys": "ANTHROPIC_API_KEY"} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string][]byte{key: []byte("s3cret")}}
		if _, err := cl.Client.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cl.StandInDeploymentController(t, ns)
	src := strings.Replace(k8sProxyConfig, `namespace          = "agents"`, `namespace          = "`+ns+`"`, 1) + strings.Replace(k8sFixNode, "%s", "  timeout = \"2m\"\n", 1)
	cfg, p, ok := k8stest.Plan(t, writeConfig(t, src))
	if !ok {
		t.Fatal("the test configuration does not plan")
	}
	c := cl.Kewplan(t, ns)
	applyCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := Apply(applyCtx, ApplyOptions{Config: cfg, Plan: p, StateDir: filepath.Join(t.TempDir(), ".kewplan"), Hooks: []Hook{&recorder{}},
			Engine: kubernetes.New(kubernetes.Options{Engine: cfg.Engine(config.EngineKubernetes).Kubernetes, Cluster: c})})
		done <- err
	}()
	managed := metav1.ListOptions{LabelSelector: k8srender.LabelManagedBy + "=" + k8srender.ManagedBy}
	var job batchv1.Job
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		jobs, err := cl.Client.BatchV1().Jobs(ns).List(ctx, managed)
		if err != nil || len(jobs.Items) == 0 {
			return false, err
		}
		job = jobs.Items[0]
		return true, nil
	}); err != nil {
		t.Fatalf("the node's Job is created: %v", err)
	}
	svcs, err := cl.Client.CoreV1().Services(ns).List(ctx, managed)
	if err != nil || len(svcs.Items) != 1 {
		t.Fatalf("the proxy's Service: %v %v", svcs, err)
	}
	ip := svcs.Items[0].Spec.ClusterIP
	secret, err := cl.Client.CoreV1().Secrets(ns).Get(ctx, svcs.Items[0].Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if url := string(secret.Data[k8srender.ProxyURLKey("fix")]); ip == "" || !strings.HasSuffix(url, "@"+ip+":3128") {
		t.Errorf("the proxy URL of fix is %q, want the Service's cluster IP %q", url, ip)
	}
	if pod := job.Spec.Template.Spec; pod.DNSPolicy != corev1.DNSNone || pod.DNSConfig == nil || strings.Join(pod.DNSConfig.Nameservers, ",") != "127.0.0.1" {
		t.Errorf("the Job's pod DNS: %q %+v; want none", pod.DNSPolicy, pod.DNSConfig)
	}
	nps, err := cl.Client.NetworkingV1().NetworkPolicies(ns).List(ctx, managed)
	if err != nil {
		t.Fatal(err)
	}
	for _, np := range nps.Items {
		if np.Spec.PodSelector.MatchLabels[k8srender.LabelStep] != k8srender.StepAgent {
			continue
		}
		for _, rule := range np.Spec.Egress {
			for _, port := range rule.Ports {
				if port.Port != nil && port.Port.IntValue() == 53 {
					t.Errorf("the agents' NetworkPolicy %s allows port 53", np.Name)
				}
			}
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
