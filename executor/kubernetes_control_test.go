package executor

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/egress"
	"github.com/kewplan/kewplan/executor/adapter"
	"github.com/kewplan/kewplan/executor/kubernetes"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/statedir"
	"github.com/kewplan/kewplan/internal/testtools/k8stest"
	"github.com/kewplan/kewplan/k8sengine"
	"github.com/kewplan/kewplan/k8srender"
)

// simProxy is kewplan's egress proxy as the simulated cluster runs it: once kewplan applies the proxy's
// Deployment, a real egress.Server is started from the configuration kewplan put in the proxy's Secret, a pod of
// the run's proxy appears with its container running, its log is the server's decision log, and the API server's
// service proxy reaches the server. Every call on the control endpoint is recorded.
type simProxy struct {
	t       *testing.T
	k       *kubelet
	mu      sync.Mutex
	server  *egress.Server
	secret  *corev1.Secret
	calls   []string // control calls, "METHOD path secret-ok", in order
	jobsAt  []int    // len(calls) when each Job was applied
	logR    *io.PipeReader
	logW    *io.PipeWriter
	started chan struct{}
}

func newSimProxy(t *testing.T, k *kubelet) *simProxy {
	sp := &simProxy{t: t, k: k, started: make(chan struct{})}
	sp.logR, sp.logW = io.Pipe()
	t.Cleanup(func() { sp.logW.Close() })
	t.Setenv(k8srender.CredentialEnv("ANTHROPIC_API_KEY"), "s3cret-key") // as in the proxy's pod
	k.cs.PrependReactor("patch", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sp.start(a.GetNamespace(), a.(k8stesting.PatchAction).GetName())
		return false, nil, nil
	})
	k.cs.PrependReactor("patch", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sp.mu.Lock()
		sp.jobsAt = append(sp.jobsAt, len(sp.calls))
		sp.mu.Unlock()
		return false, nil, nil
	})
	return sp
}

// start runs the proxy of the Deployment name: its configuration is in the Secret of the same name.
func (sp *simProxy) start(ns, name string) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.server != nil {
		return
	}
	obj, err := sp.k.cs.Tracker().Get(corev1.SchemeGroupVersion.WithResource("secrets"), ns, name)
	if err != nil {
		sp.t.Errorf("the proxy's Secret %s: %v", name, err)
		return
	}
	sp.secret = obj.(*corev1.Secret).DeepCopy()
	cfg, err := egress.ParseConfig(sp.secret.Data[k8srender.ProxyConfigKey])
	if err != nil {
		sp.t.Errorf("the proxy's configuration: %v", err)
		return
	}
	// Nothing leaves the machine: every name resolves to loopback, where nothing answers TLS on 443.
	opts := egress.Options{Resolve: func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	},
		AddressAllowed: func(a netip.Addr) bool { return a.IsLoopback() }}
	if sp.server, err = egress.NewServer(cfg, sp.logW, opts); err != nil {
		sp.t.Errorf("the proxy does not start: %v", err)
		return
	}
	run := sp.secret.Labels[k8srender.LabelRun]
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name + "-7d9f-x2k4q", Namespace: ns,
		Labels: map[string]string{k8srender.LabelManagedBy: k8srender.ManagedBy, k8srender.LabelRun: run, k8srender.LabelStep: k8srender.StepEgressProxy}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: k8srender.StepEgressProxy,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}
	if err := sp.k.cs.Tracker().Add(pod); err != nil {
		sp.t.Errorf("the proxy's pod: %v", err)
	}
	close(sp.started)
}

// ServeHTTP is the proxy behind the API server's service proxy.
func (sp *simProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sp.mu.Lock()
	s, cfg := sp.server, sp.secret
	if strings.HasPrefix(r.URL.Path, egress.ControlEndNodePath) && s != nil {
		pc, _ := egress.ParseConfig(cfg.Data[k8srender.ProxyConfigKey])
		ok := pc != nil && pc.ControlSecret != "" && r.Header.Get(egress.ControlSecretHeader) == pc.ControlSecret
		path := r.URL.Path
		if strings.Contains(path, "/kewplan-sync-") {
			path = egress.ControlEndNodePath + "SYNC/end"
		}
		sp.calls = append(sp.calls, fmt.Sprintf("%s %s %v", r.Method, path, ok))
	}
	sp.mu.Unlock()
	if s == nil {
		http.Error(w, "no endpoints available", http.StatusServiceUnavailable)
		return
	}
	s.ServeHTTP(w, r)
}

// logs serves the proxy's log, followed until the follower's context ends, and every other log as the kubelet.
func (sp *simProxy) logs(ctx context.Context, pod, step string) (io.ReadCloser, error) {
	if step != k8srender.StepEgressProxy {
		return sp.k.logs(ctx, pod, step)
	}
	go func() { <-ctx.Done(); sp.logR.CloseWithError(ctx.Err()) }()
	return io.NopCloser(sp.logR), nil
}

// decision writes a decision line into the proxy's log, as the proxy writes it.
func (sp *simProxy) decision(line string) {
	if _, err := io.WriteString(sp.logW, line+"\n"); err != nil {
		sp.t.Errorf("the proxy's log: %v", err)
	}
}

// TestKubernetesProxyControlAndMeter: a brokered node on Kubernetes is controlled and metered as on Docker. Apply
// reaches kewplan's proxy through the API server's service proxy with the run's control secret: before the
// retry's Job it starts attempt 2 (the proxy's sums start at zero), after the node's last attempt it ends the
// node, and from then on the node's placeholder is refused. The proxy pod's decision log is read into the ledger:
// each attempt's brokered requests with the proxy's meter (both meters in the ledger) and the denials.
func TestKubernetesProxyControlAndMeter(t *testing.T) {
	text := stream(t, "claude-code", "text")
	var sp *simProxy
	k := newKubelet(t, func(node string, attempt int) simRun {
		// What the proxy logged while the attempt's agent ran: a metered model call, and on the first attempt a
		// request for a host the node may not reach.
		sp.decision(fmt.Sprintf(`{"time":"2026-12-07T10:00:0%dZ","kind":"broker","node":"fix","attempt":%d,"method":"POST","host":"api.anthropic.com","path":"/v1/messages","status":200,"allowed":true,"reason":"brokered",`+
			`"meter":{"model_call":true,"usage":{"model":"claude-sonnet-4-5","input_tokens":%d,"output_tokens":50,"cost_source":"estimated","cost_usd":0.01}}}`, attempt, attempt, 1000*attempt))
		if attempt == 1 {
			sp.decision(`{"time":"2026-12-07T10:00:01Z","node":"fix","method":"CONNECT","host":"exfil.example","port":443,"allowed":false,"reason":"host not allowed"}`)
			return simRun{agentLog: text, deadline: true}
		}
		return simRun{agentLog: text, commit: fixCommit}
	})
	sp = newSimProxy(t, k)
	recordApplies(t, k) // the Services get a cluster IP
	retry := "  retry {\n    attempts = 2\n    backoff  = \"1s\"\n    on       = [\"timeout\"]\n  }\n"
	src := k8sProxyConfig + fmt.Sprintf(k8sFixNode, retry)
	src = strings.Replace(src, "sandbox {\n", "sandbox {\n  network = \"allowlist\"\n", 1)
	r := applyK8sConfig(context.Background(), t, k, src, func(o *ApplyOptions) {
		o.retrySleep = func(context.Context, time.Duration) error { return nil }
		cl := (&k8sengine.Cluster{API: k8stest.FakeAPI{CS: k.cs, Services: sp}, Namespace: k8sNamespace}).WithLogs(sp.logs)
		o.Engine = kubernetes.New(kubernetes.Options{Engine: o.Config.Engine(config.EngineKubernetes).Kubernetes, Cluster: cl})
	})
	if r.err != nil {
		t.Fatal(r.err)
	}
	if fix := r.ledgerRow(t, "fix"); fix.Status != ledger.StatusSucceeded {
		t.Fatalf("fix: %s %q", fix.Status, fix.Reason)
	}

	sp.mu.Lock()
	calls, jobsAt := append([]string(nil), sp.calls...), append([]int(nil), sp.jobsAt...)
	sp.mu.Unlock()
	sync := "POST " + egress.ControlEndNodePath + "SYNC/end true"
	want := []string{sync, "POST " + egress.ControlEndNodePath + "fix/attempts/2 true", sync, "POST " + egress.ControlEndNodePath + "fix/end true"}
	if diff := cmp.Diff(want, calls); diff != "" {
		t.Errorf("calls on the proxy's control endpoint (-want +got):\n%s", diff)
	}
	if len(jobsAt) != 2 || jobsAt[1] != 2 {
		t.Errorf("the Jobs were applied after %v control calls, want the retry's after the start of attempt 2", jobsAt)
	}

	// The node ended: its placeholder is refused, whoever presents it.
	ph := string(sp.secret.Data[k8srender.PlaceholderKey("fix", "ANTHROPIC_API_KEY")])
	identity := ""
	if pc, _ := egress.ParseConfig(sp.secret.Data[k8srender.ProxyConfigKey]); pc != nil {
		for _, n := range pc.Nodes {
			if n.Name == "fix" {
				identity = egress.BrokerIdentity(n.Name, n.Secret) // as fix's own base URL carries it
			}
		}
	}
	req := httptest.NewRequest(http.MethodGet, egress.BrokerPathPrefix+"fix/"+identity+"/api.anthropic.com/v1/models", nil)
	req.Host = clusterIP + ":3128" // as the agent's base URL names the proxy
	req.Header.Set("x-api-key", ph)
	rec := httptest.NewRecorder()
	sp.server.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), `node \"fix\" ended`) {
		t.Errorf("fix's placeholder after the node ended: %d %s, want 403 saying the node ended", rec.Code, rec.Body)
	}
	if pc, _ := egress.ParseConfig(sp.secret.Data[k8srender.ProxyConfigKey]); pc != nil {
		for _, n := range pc.Nodes {
			if n.Name == "fix" && (n.Broker == nil || n.Broker.EndsAt == nil || n.Broker.EndsAt.Before(time.Now().Add(2*adapter.DefaultTimeout))) {
				t.Errorf("fix's broker ends_at %v, want the backstop of its two attempts", n.Broker.EndsAt)
			}
		}
	}

	// Both meters of each attempt, the brokered requests and the denial, in the ledger.
	l, err := ledger.Open(statedir.Dir{Root: r.stateDir}.Ledger())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	reqs, err := l.BrokerRequests(r.sum.RunID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, br := range reqs {
		got = append(got, fmt.Sprintf("%s a%d %s %s %d tokens %d+%d", br.Node, br.Attempt, br.Method, br.Path, br.Status, br.InputTokens, br.OutputTokens))
	}
	if diff := cmp.Diff([]string{"fix a1 POST /v1/messages 200 tokens 1000+50", "fix a2 POST /v1/messages 200 tokens 2000+50"}, got); diff != "" {
		t.Errorf("brokered requests in the ledger (-want +got):\n%s", diff)
	}
	meters, err := l.Meters(r.sum.RunID)
	if err != nil {
		t.Fatal(err)
	}
	var per []string
	for _, m := range meters {
		per = append(per, fmt.Sprintf("%s a%d proxy %d tokens, agent %d tokens", m.Node, m.Attempt, m.Proxy.Tokens, m.Agent.Tokens))
	}
	agent := metered(t, "claude-code", "claude-sonnet-4-5", text)
	agentTokens := agent.InputTokens + agent.OutputTokens + agent.CacheWriteTokens
	wantMeters := []string{fmt.Sprintf("fix a1 proxy 1050 tokens, agent %d tokens", agentTokens), fmt.Sprintf("fix a2 proxy 2050 tokens, agent %d tokens", agentTokens)}
	if diff := cmp.Diff(wantMeters, per); diff != "" {
		t.Errorf("both meters by attempt (-want +got):\n%s", diff)
	}
	denials, err := l.EgressDenials(r.sum.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if len(denials) != 1 || denials[0].Node != "fix" || denials[0].Host != "exfil.example" {
		t.Errorf("denials %+v, want fix's request for exfil.example", denials)
	}
}
