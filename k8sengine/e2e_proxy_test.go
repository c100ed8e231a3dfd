package k8sengine_test

import (
	"net/http"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kewplan/kewplan/internal/testtools/k8stest"
	"github.com/kewplan/kewplan/k8srender"
)

// TestE2EEgressProxyAccepted: with proxy_image, every rendered object (the Jobs, their Secrets, both
// NetworkPolicies, and kewplan's egress proxy: its Secret, Deployment and Service) is accepted by the real API server
// with server-side apply in a namespace enforcing Pod Security "restricted", and the proxy's pod is admitted too
// (a server-side dry run, as for the Jobs' pods: there is no Deployment controller nor kubelet here). The objects
// are applied one by one with Cluster.Apply, so a refusal names its object.
func TestE2EEgressProxyAccepted(t *testing.T) {
	cl := k8stest.Start(t)
	ctx := e2eTimeout(t)
	ns := cl.Namespace(t)
	cfg, p, ok := k8stest.Plan(t, "../examples/kubernetes.hcl")
	if !ok {
		t.Fatal("examples/kubernetes.hcl does not plan")
	}
	e := k8stest.Engine(cfg, ns)
	e.RuntimeClass = "" // no RuntimeClass is installed in the test control plane
	e.ProxyImage = "registry.example.com/kewplan-egress-proxy:0123456789abcdef"
	m, diags := k8srender.Render(p, k8srender.Options{Engine: e, RunID: "proxy", NameSuffix: "proxy"})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	c := cl.Kewplan(t, ns)
	kinds := map[string]int{}
	for _, o := range m.All() {
		kind := o.GetObjectKind().GroupVersionKind().Kind
		if err := c.Apply(ctx, []k8srender.Object{o}); err != nil {
			t.Errorf("apply %s %s: %v", kind, o.GetName(), err)
		}
		kinds[kind]++
	}
	if kinds["Deployment"] != 1 || kinds["Service"] != 1 || kinds["NetworkPolicy"] != 2 {
		t.Fatalf("rendered kinds %v: want kewplan's proxy among them", kinds)
	}
	for _, o := range m.Shared {
		d, ok := o.(*appsv1.Deployment)
		if !ok {
			continue
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: d.Name + "-probe", Namespace: ns, Labels: d.Spec.Template.Labels},
			Spec: *d.Spec.Template.Spec.DeepCopy()}
		if _, err := cl.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Errorf("the egress proxy's pod is refused: %v", err)
		}
	}
	for _, n := range m.Nodes {
		if _, err := cl.Client.CoreV1().Pods(ns).Create(ctx, podOf(n.Job, ns), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Errorf("the pod of node %s is refused: %v", n.Node, err)
		}
	}
}

// TestE2EProxyControlThroughTheAPIServer: the real API server accepts a control call on the proxy's Service
// through its service proxy, in the form ProxyControl sends it; with no pod behind the Service (there is no
// Deployment controller here) it answers itself, and ProxyControl's error quotes it.
func TestE2EProxyControlThroughTheAPIServer(t *testing.T) {
	cl := k8stest.Start(t)
	ctx := e2eTimeout(t)
	ns := cl.Namespace(t)
	cfg, p, ok := k8stest.Plan(t, "../examples/kubernetes.hcl")
	if !ok {
		t.Fatal("examples/kubernetes.hcl does not plan")
	}
	e := k8stest.Engine(cfg, ns)
	e.ProxyImage = "registry.example.com/kewplan-egress-proxy:0123456789abcdef"
	m, diags := k8srender.Render(p, k8srender.Options{Engine: e, RunID: "proxy", NameSuffix: "proxy"})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	c := cl.Kewplan(t, ns)
	var svc k8srender.Object
	for _, o := range m.Shared {
		if o.GetObjectKind().GroupVersionKind().Kind == "Service" {
			svc = o
		}
	}
	if err := c.Apply(ctx, []k8srender.Object{svc}); err != nil {
		t.Fatal(err)
	}
	err := c.ProxyControl(ctx, svc.GetName(), int(e.ProxyPort), "/control/nodes/fix/end", http.Header{"X-Kewplan-Control-Secret": {"s"}})
	if err == nil || !strings.Contains(err.Error(), "answered 503") || !strings.Contains(err.Error(), "services/proxy on "+ns+"/"+svc.GetName()) {
		t.Errorf("ProxyControl with no pod behind the Service: %v, want the API server's 503", err)
	}
}
