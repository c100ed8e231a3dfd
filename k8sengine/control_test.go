package k8sengine_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/kewplan/kewplan/internal/testtools/k8stest"
	"github.com/kewplan/kewplan/k8sengine"
	"github.com/kewplan/kewplan/k8srender"
)

// TestProxyControl: a call on the proxy's control endpoint goes to the API server's service proxy of the proxy's
// Service and port, as a POST with the given header (the client's own credentials apart); a 204 is success, and
// any other answer, the proxy's or the API server's, is an error that quotes it.
func TestProxyControl(t *testing.T) {
	type call struct{ Method, Path, Secret, Authz string }
	var calls []call
	answer := http.StatusNoContent
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls = append(calls, call{r.Method, r.URL.Path, r.Header.Get("X-Kewplan-Control-Secret"), r.Header.Get("Authorization")})
		if answer != http.StatusNoContent {
			http.Error(w, "kewplan egress proxy: unknown node\x1b[2J", answer)
			return
		}
		w.WriteHeader(answer)
	}))
	defer srv.Close()
	c, err := k8sengine.New(&rest.Config{Host: srv.URL, BearerToken: "cluster-token"}, "agents")
	if err != nil {
		t.Fatal(err)
	}
	hdr := http.Header{"X-Kewplan-Control-Secret": {"the-control-secret"}}
	ctx := context.Background()
	if err := c.ProxyControl(ctx, "kewplan-egress-proxy-r1", 3128, "/control/nodes/fix/end", hdr); err != nil {
		t.Fatalf("ProxyControl: %v", err)
	}
	answer = http.StatusNotFound
	err = c.ProxyControl(ctx, "kewplan-egress-proxy-r1", 3128, "/control/nodes/fix/attempts/2", hdr)
	if err == nil || !strings.Contains(err.Error(), "answered 404: kewplan egress proxy: unknown node") || !strings.Contains(err.Error(), "services/proxy on agents/kewplan-egress-proxy-r1") {
		t.Errorf("a 404: %v", err)
	}
	want := []call{
		{"POST", "/api/v1/namespaces/agents/services/kewplan-egress-proxy-r1:3128/proxy/control/nodes/fix/end", "the-control-secret", "Bearer cluster-token"},
		{"POST", "/api/v1/namespaces/agents/services/kewplan-egress-proxy-r1:3128/proxy/control/nodes/fix/attempts/2", "the-control-secret", "Bearer cluster-token"},
	}
	if diff := cmp.Diff(want, calls); diff != "" {
		t.Errorf("requests at the API server (-want +got):\n%s", diff)
	}

	// The fake answers from its Services handler, or as an API server with no endpoint for the Service.
	fake := k8stest.Fake()
	fc := &k8sengine.Cluster{API: fake, Namespace: "agents"}
	if err := fc.ProxyControl(ctx, "p", 3128, "/control/nodes/fix/end", hdr); err == nil || !strings.Contains(err.Error(), "answered 503") {
		t.Errorf("no endpoints: %v", err)
	}
}

// TestRunningContainers: the run's pods of a step whose container runs, with their restarts; a pod of another
// step, a pod whose container waits and another run's pod are not.
func TestRunningContainers(t *testing.T) {
	pod := func(name, run, step string, running bool, restarts int32) *corev1.Pod {
		st := corev1.ContainerStatus{Name: k8srender.StepEgressProxy, RestartCount: restarts}
		if running {
			st.State.Running = &corev1.ContainerStateRunning{}
		} else {
			st.State.Waiting = &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "agents",
			Labels: map[string]string{k8srender.LabelManagedBy: k8srender.ManagedBy, k8srender.LabelRun: run, k8srender.LabelStep: step}},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{st}}}
	}
	fake := k8stest.Fake(
		pod("proxy-b", "r1", k8srender.StepEgressProxy, true, 2),
		pod("proxy-a", "r1", k8srender.StepEgressProxy, true, 0),
		pod("proxy-waiting", "r1", k8srender.StepEgressProxy, false, 1),
		pod("agent", "r1", k8srender.StepAgent, true, 0),
		pod("proxy-other-run", "r2", k8srender.StepEgressProxy, true, 0),
	)
	c := &k8sengine.Cluster{API: fake, Namespace: "agents"}
	w, err := c.WatchRun(context.Background(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	got := w.RunningContainers(k8srender.StepEgressProxy, k8srender.StepEgressProxy)
	if diff := cmp.Diff([]k8sengine.Running{{Pod: "proxy-a"}, {Pod: "proxy-b", Restarts: 2}}, got); diff != "" {
		t.Errorf("running proxy containers (-want +got):\n%s", diff)
	}
}
