package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kewplan/kewplan/egress"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/internal/testtools/k8stest"
	"github.com/kewplan/kewplan/k8srender"
)

// k8sProxyConfig is a run whose node goes through kewplan's own egress proxy (proxy_image, network allowlist).
const k8sProxyConfig = `
engine "kubernetes" {
  namespace          = "agents"
  git_secret         = "kewplan-git"
  credentials_secret = "agent-keys"
  proxy_image        = "registry.example.com/kewplan-egress-proxy@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
}
sandbox {
  images = {
    "claude-code" = "ghcr.io/kewplan/kew-agent@sha256:5a1b6c9a0d3e4f7081926354a7b8c9d0e1f2a3b4c5d6e7f8091a2b3c4d5e6f70"
  }
}
`

// clusterIP is the address the simulated Service allocator gives every Service.
const clusterIP = "10.96.7.31"

// appliedObjects records what kewplan sent by server-side apply, and gives every Service a cluster IP (the
// fake clientset allocates none).
type appliedObjects struct {
	mu      sync.Mutex
	secrets []corev1.Secret
	jobs    []batchv1.Job
}

func recordApplies(t *testing.T, k *kubelet) *appliedObjects {
	rec := &appliedObjects{}
	k.cs.PrependReactor("patch", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		body := a.(k8stesting.PatchAction).GetPatch()
		rec.mu.Lock()
		defer rec.mu.Unlock()
		switch a.GetResource().Resource {
		case "secrets":
			var s corev1.Secret
			if err := json.Unmarshal(body, &s); err != nil {
				t.Error(err)
			}
			rec.secrets = append(rec.secrets, s)
		case "jobs":
			var j batchv1.Job
			if err := json.Unmarshal(body, &j); err != nil {
				t.Error(err)
			}
			rec.jobs = append(rec.jobs, j)
		}
		return false, nil, nil
	})
	k.cs.PrependReactor("get", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj, err := k.cs.Tracker().Get(corev1.SchemeGroupVersion.WithResource("services"), a.GetNamespace(), a.(k8stesting.GetAction).GetName())
		if err != nil {
			return true, nil, err
		}
		svc := obj.(*corev1.Service).DeepCopy()
		svc.Spec.ClusterIP = clusterIP
		return true, svc, nil
	})
	return rec
}

// proxyConfig is the egress proxy's configuration kewplan applied.
func (r *appliedObjects) proxyConfig(t *testing.T) (*egress.Config, *corev1.Secret) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.secrets {
		if data, ok := r.secrets[i].Data[k8srender.ProxyConfigKey]; ok {
			// As in the proxy's pod, whose environment holds the brokered credentials from credentials_secret.
			t.Setenv(k8srender.CredentialEnv("ANTHROPIC_API_KEY"), "s3cret-key")
			cfg, err := egress.ParseConfig(data)
			if err != nil {
				t.Fatalf("the applied proxy configuration does not parse: %v", err)
			}
			return cfg, &r.secrets[i]
		}
	}
	t.Fatal("no proxy configuration was applied")
	return nil, nil
}

// TestKubernetesProxySecretsPerApply: two applies of the same plan give the proxy users different random secrets,
// none of which any plan view (the rendered manifests, the plan's JSON document) holds; the proxied pod has no
// DNS and reaches the proxy by the cluster IP apply read from the proxy's Service.
func TestKubernetesProxySecretsPerApply(t *testing.T) {
	text := stream(t, "claude-code", "text")
	src := k8sProxyConfig + fmt.Sprintf(k8sFixNode, "")
	var secrets []string
	for i := 0; i < 2; i++ {
		k := newKubelet(t, func(string, int) simRun { return simRun{agentLog: text, commit: fixCommit} })
		rec := recordApplies(t, k)
		r := applyK8sConfig(context.Background(), t, k, src)
		if r.err != nil {
			t.Fatal(r.err)
		}
		if fix := r.ledgerRow(t, "fix"); fix.Status != ledger.StatusSucceeded {
			t.Fatalf("fix: %s %q", fix.Status, fix.Reason)
		}
		cfg, secret := rec.proxyConfig(t)
		// fix is brokered: its placeholder for the one credential the Secret holds is fresh too, and the real value
		// is in no object kewplan applied but the cluster's own Secret.
		ph := string(secret.Data[k8srender.PlaceholderKey("fix", "ANTHROPIC_API_KEY")])
		if _, oauth := secret.Data[k8srender.PlaceholderKey("fix", "CLAUDE_CODE_OAUTH_TOKEN")]; oauth || ph == "" {
			t.Errorf("placeholders in the proxy's Secret: %v; want one for ANTHROPIC_API_KEY only (the Secret's one key)", slices.Collect(maps.Keys(secret.Data)))
		}
		secrets = append(secrets, ph)
		for _, n := range cfg.Nodes {
			secrets = append(secrets, n.Secret)
			url := string(secret.Data[k8srender.ProxyURLKey(n.Name)])
			if !strings.HasSuffix(url, "@"+clusterIP+":3128") {
				t.Errorf("proxy URL of %s is %q, want the Service's cluster IP", n.Name, url)
			}
		}
		rec.mu.Lock()
		if len(rec.jobs) != 1 {
			t.Fatalf("%d Jobs applied, want 1", len(rec.jobs))
		}
		pod := rec.jobs[0].Spec.Template.Spec
		rec.mu.Unlock()
		if pod.DNSPolicy != corev1.DNSNone || pod.DNSConfig == nil || strings.Join(pod.DNSConfig.Nameservers, ",") != "127.0.0.1" {
			t.Errorf("the proxied pod's DNS: %q %+v; want none", pod.DNSPolicy, pod.DNSConfig)
		}
	}
	if len(secrets) != 6 {
		t.Fatalf("secrets %d, want 2 users and a placeholder, twice", len(secrets))
	}
	seen := map[string]bool{}
	for _, s := range secrets {
		if seen[s] || len(s) < 32 {
			t.Errorf("secret %q is repeated or short", s)
		}
		seen[s] = true
	}

	// What the plan shows holds none of them.
	cfg, p, ok := k8stest.Plan(t, writeConfig(t, src))
	if !ok {
		t.Fatal("the configuration does not plan")
	}
	m, diags := k8srender.Render(p, k8srender.Options{Engine: k8stest.Engine(cfg, "agents")})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	yaml, err := m.YAML()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := json.Marshal(k8srender.NewPlanDocument(m, k8stest.Engine(cfg, "agents")))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets {
		if strings.Contains(string(yaml), s) || strings.Contains(string(doc), s) {
			t.Errorf("the plan shows the apply's secret %s", s)
		}
	}
}

// writeConfig writes src as a configuration directory's main.hcl and returns the directory.
func writeConfig(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestKubernetesPreflightOperatorProxy: without proxy_image, a proxied node needs the operator's proxy Service
// with a cluster IP (its pods have no DNS); a missing one stops the run before any Job.
func TestKubernetesPreflightOperatorProxy(t *testing.T) {
	k := newKubelet(t, func(string, int) simRun { return simRun{} })
	src := strings.Replace(k8sProxyConfig, "  proxy_image", "  # proxy_image", 1) + fmt.Sprintf(k8sFixNode, "")
	r := applyK8sConfig(context.Background(), t, k, src)
	var pe *PreflightError
	if !errorAs(r.err, &pe) || !strings.Contains(r.err.Error(), "agents/kewplan-egress-proxy") {
		t.Fatalf("apply = %v, want a preflight error naming the proxy's Service", r.err)
	}
	if jobs := k.jobNames(); len(jobs) != 0 {
		t.Errorf("Jobs %v were created", jobs)
	}

	// With the Service, the node's steps name its cluster IP.
	text := stream(t, "claude-code", "text")
	k = newKubelet(t, func(string, int) simRun { return simRun{agentLog: text, commit: fixCommit} })
	rec := recordApplies(t, k)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "kewplan-egress-proxy", Namespace: k8sNamespace}}
	if err := k.cs.Tracker().Add(svc); err != nil {
		t.Fatal(err)
	}
	if r := applyK8sConfig(context.Background(), t, k, src); r.err != nil {
		t.Fatal(r.err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.jobs) != 1 {
		t.Fatalf("%d Jobs applied, want 1", len(rec.jobs))
	}
	for _, c := range append(rec.jobs[0].Spec.Template.Spec.InitContainers, rec.jobs[0].Spec.Template.Spec.Containers...) {
		got := ""
		for _, ev := range c.Env {
			if ev.Name == "HTTPS_PROXY" {
				got = ev.Value
			}
		}
		if got != "http://"+clusterIP+":3128" {
			t.Errorf("%s: HTTPS_PROXY %q, want the Service's cluster IP", c.Name, got)
		}
	}
}
