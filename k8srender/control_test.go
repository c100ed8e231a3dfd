package k8srender_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kewplan/kewplan/egress"
	"github.com/kewplan/kewplan/internal/testtools/k8stest"
	"github.com/kewplan/kewplan/k8srender"
)

// TestRenderProxyControl: with a brokered node, kewplan's proxy has a control secret (apply's, per run) in its
// configuration, which only the proxy's pod mounts: it is under no other key of the proxy's Secret, in no
// ConfigMap and in no container's environment; the brokered node's broker section ends at apply's backstop; the
// plan's render holds the secret's placeholder, which the proxy refuses.
func TestRenderProxyControl(t *testing.T) {
	secrets := applySecrets()
	control := secrets[k8srender.ProxyControlKey]
	cfg, p, ok := k8stest.Plan(t, "../examples/kubernetes.hcl")
	if !ok {
		t.Fatal("the example does not plan")
	}
	e := k8stest.Engine(cfg, "agents")
	e.ProxyImage = proxyImage
	endsAt := time.Date(2026, 12, 7, 12, 0, 0, 0, time.FixedZone("CET", 3600))
	m := render(t, "../examples/kubernetes.hcl", k8srender.Options{Engine: e, ProxySecrets: secrets, ProxyAddress: proxyAddress,
		BrokerEndsAt: map[string]time.Time{"fix": endsAt}})

	var secret *corev1.Secret
	var deploy *appsv1.Deployment
	for _, o := range m.Shared {
		switch o := o.(type) {
		case *corev1.Secret:
			secret = o
		case *appsv1.Deployment:
			deploy = o
		case *corev1.ConfigMap:
			t.Errorf("a ConfigMap %s among the shared objects", o.Name)
		}
	}
	if secret == nil || deploy == nil {
		t.Fatal("no proxy Secret or Deployment")
	}
	t.Setenv(k8srender.CredentialEnv("ANTHROPIC_API_KEY"), "sk-ant-real-test-value")
	pc, err := egress.ParseConfig(secret.Data[k8srender.ProxyConfigKey])
	if err != nil {
		t.Fatalf("the proxy's configuration does not parse: %v", err)
	}
	if pc.ControlSecret != control {
		t.Errorf("control secret %q, want apply's", pc.ControlSecret)
	}
	ends := map[string]string{}
	for _, n := range pc.Nodes {
		if n.Broker != nil && n.Broker.EndsAt != nil {
			ends[n.Name] = n.Broker.EndsAt.Format(time.RFC3339)
		}
	}
	if diff := cmp.Diff(map[string]string{"fix": "2026-12-07T11:00:00Z"}, ends); diff != "" {
		t.Errorf("brokers' ends_at (-want +got):\n%s", diff)
	}
	for k, v := range secret.Data {
		if k != k8srender.ProxyConfigKey && strings.Contains(string(v), control) {
			t.Errorf("the proxy's Secret holds the control secret under %q", k)
		}
	}
	if vols := deploy.Spec.Template.Spec.Volumes; len(vols) != 1 || len(vols[0].Secret.Items) != 1 || vols[0].Secret.Items[0].Key != k8srender.ProxyConfigKey {
		t.Errorf("the proxy's pod mounts %+v, want its configuration alone", vols)
	}
	for _, n := range m.Nodes {
		pod := n.Job.Spec.Template.Spec
		for _, c := range append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...) {
			for _, ev := range c.Env {
				if strings.Contains(ev.Value, control) || (ev.ValueFrom != nil && ev.ValueFrom.SecretKeyRef != nil && ev.ValueFrom.SecretKeyRef.Key == k8srender.ProxyConfigKey) {
					t.Errorf("%s/%s: %s reaches the control secret", n.Node, c.Name, ev.Name)
				}
			}
		}
	}
	if diff := cmp.Diff(map[string]string{"fix": "fix"}, k8srender.BrokeredUsers(e, p, nil)); diff != "" {
		t.Errorf("BrokeredUsers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"fix": "fix", "fix-git": "fix", "review": "review", "review-git": "review"}, k8srender.ProxyUserNodes(e, p)); diff != "" {
		t.Errorf("ProxyUserNodes (-want +got):\n%s", diff)
	}

	// The plan's render: the placeholder, which the proxy refuses to start with.
	planned := render(t, "../examples/kubernetes.hcl", k8srender.Options{Engine: e})
	for _, o := range planned.Shared {
		if s, ok := o.(*corev1.Secret); ok {
			raw := string(s.Data[k8srender.ProxyConfigKey])
			if !strings.Contains(raw, `"control_secret": "`+k8srender.ProxySecretPlaceholder+`"`) || strings.Contains(raw, "ends_at") {
				t.Errorf("the plan's proxy configuration:\n%s", raw)
			}
		}
	}
}
