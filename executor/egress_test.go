package executor

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kewplan/kewplan/egress"
	"github.com/kewplan/kewplan/egress/suggest"
	"github.com/kewplan/kewplan/executor/docker"
	"github.com/kewplan/kewplan/executor/engine"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/statedir"
	"github.com/kewplan/kewplan/planner"
)

// egressWorld is a test's proxy network with a stub server on it that answers as api.anthropic.com and pypi.org
// (network aliases: the proxy resolves them through Docker's DNS on that user-defined network).
type egressWorld struct {
	proxyNet string
	stub     *engine.Service
}

func newEgressWorld(t *testing.T, f *fixture) *egressWorld { return newEgressWorldTB(t, f) }

func newEgressWorldTB(t testing.TB, f *fixture) *egressWorld {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := &egressWorld{proxyNet: "kewplan-test-pn-" + randomSuffix()}
	if _, err := f.eng.CreateBridge(ctx, w.proxyNet, false, map[string]string{"kewplan.test": "1"}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.eng.RemoveNetwork(context.Background(), w.proxyNet); err != nil {
			t.Errorf("remove test proxy network: %v", err)
		}
	})
	stub, err := f.eng.StartService(ctx, engine.ServiceSpec{
		Name: "kewplan-test-stub-" + randomSuffix(), Image: f.image, Cmd: []string{"--stub", ":443"},
		Labels: map[string]string{"kewplan.test": "1"}, Networks: []string{w.proxyNet},
		Aliases: map[string][]string{w.proxyNet: {"api.anthropic.com", "pypi.org"}},
	}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.stub = stub
	t.Cleanup(func() {
		if err := stub.Stop(); err != nil {
			t.Errorf("remove stub: %v", err)
		}
	})
	f.sandboxExtra = fmt.Sprintf("  egress {\n    proxy_network = %q\n  }\n", w.proxyNet)
	return w
}

// egressReport is the fake agent's mode=egress system event, read back from the node's stdout log.
type egressReport struct {
	ProxySet bool   `json:"proxy_set"`
	NoProxy  string `json:"no_proxy"`
	Resolve  string `json:"resolve"`
	Results  map[string]struct {
		Status   int    `json:"status"`
		Greeting string `json:"greeting"`
	} `json:"results"`
}

func readEgressReport(t *testing.T, path string) egressReport {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev struct {
			Subtype string `json:"subtype"`
			egressReport
		}
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Subtype == "egress" {
			return ev.egressReport
		}
	}
	t.Fatalf("no egress report in %s", path)
	return egressReport{}
}

// TestEgressProxyDoneWhen: a claude-code node on the default allowlist network reaches
// api.anthropic.com:443 through kewplan's own proxy and nothing else (another host, an IP literal, another port,
// another node's host), cannot resolve external names, and every refusal is in the ledger; nothing is left.
func TestEgressProxyDoneWhen(t *testing.T) {
	f := newFixture(t)
	newEgressWorld(t, f)
	cfg := f.config(`
node "%[1]sagent" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  ref    = "main"
  prompt = "mode=egress\ntargets=api.anthropic.com:443,evil.example.com:443,1.2.3.4:443,api.anthropic.com:8443,pypi.org:443\nresolve=kewplan-dns-probe.example.com"
}

node "%[1]spip" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  ref    = "main"
  prompt = "mode=egress\ntargets=pypi.org:443"
  egress { allow = ["pypi.org"] }
}
`)
	sum, _, err := f.apply(context.Background(), cfg, func(o *ApplyOptions) { o.EgressAllowPrivateAddresses = true })
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	if ok, _ := f.eng.ContainerExists(context.Background(), docker.EgressProxyPrefix+sum.RunID); ok {
		t.Errorf("the egress proxy %s%s was left behind", docker.EgressProxyPrefix, sum.RunID)
	}
	agent, pip := resultOf(t, sum, f.node("agent")), resultOf(t, sum, f.node("pip"))
	for _, r := range []ledger.NodeResult{agent, pip} {
		if !ledger.NodeSucceeded(r.Status) {
			t.Fatalf("node %s: %s (%s)", r.Node, r.Status, r.Reason)
		}
	}
	rep := readEgressReport(t, agent.StdoutLog)
	if !rep.ProxySet || rep.NoProxy != planner.NoProxyValue {
		t.Errorf("proxy environment: HTTPS_PROXY set %v, NO_PROXY %q", rep.ProxySet, rep.NoProxy)
	}
	want := map[string]int{"api.anthropic.com:443": 200, "evil.example.com:443": 403, "1.2.3.4:443": 403, "api.anthropic.com:8443": 403, "pypi.org:443": 403}
	for target, code := range want {
		if got := rep.Results[target].Status; got != code {
			t.Errorf("CONNECT %s: %d, want %d", target, got, code)
		}
	}
	defer func() { // the adversarial suite's D6 rows, from what this apply saw
		rows := []struct{ attack, target, reason string }{
			{"CONNECT to a host no list allows", "evil.example.com:443", egress.ReasonHostNotAllowed},
			{"CONNECT to an IP literal", "1.2.3.4:443", egress.ReasonIPLiteral},
			{"CONNECT to an allowed host on another port", "api.anthropic.com:8443", egress.ReasonPortNotAllowed},
			{"CONNECT to another node's extra host", "pypi.org:443", egress.ReasonOtherNodesHost},
		}
		for _, r := range rows {
			c := adv(t, "D6", r.attack, "403 from kewplan's proxy; the denial recorded with node, host, port, reason and time")
			c.check(rep.Results[r.target].Status == 403 && deniedFor(sum, r.target) == r.reason,
				"%s: status %d, recorded reason %q", r.target, rep.Results[r.target].Status, deniedFor(sum, r.target))
		}
		c := adv(t, "D6", "CONNECT to the runner's model endpoint (control)", "200, the tunnel reaches the endpoint")
		c.check(rep.Results["api.anthropic.com:443"].Greeting == "kewplan-stub", "api.anthropic.com:443: %+v", rep.Results["api.anthropic.com:443"])
	}()
	if g := rep.Results["api.anthropic.com:443"].Greeting; g != "kewplan-stub" {
		t.Errorf("the tunnel to api.anthropic.com:443 did not reach the stub: %q", g)
	}
	if !strings.HasPrefix(rep.Resolve, "failed") {
		t.Errorf("the agent resolved an external name: %s", rep.Resolve)
	}
	if got := readEgressReport(t, pip.StdoutLog).Results["pypi.org:443"]; got.Status != 200 || got.Greeting != "kewplan-stub" {
		t.Errorf("node pip: CONNECT pypi.org:443 = %+v, want 200 through to the stub", got)
	}

	// Every refusal, with node, host, port, reason and time: in the ledger and in the summary.
	l, err := ledger.Open(statedir.Dir{Root: f.stateDir}.Ledger())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	denials, err := l.EgressDenials(sum.RunID)
	if err != nil {
		t.Fatal(err)
	}
	wantReasons := map[string]string{
		"evil.example.com:443":   egress.ReasonHostNotAllowed,
		"1.2.3.4:443":            egress.ReasonIPLiteral,
		"api.anthropic.com:8443": egress.ReasonPortNotAllowed,
		"pypi.org:443":           egress.ReasonOtherNodesHost,
	}
	got := map[string]string{}
	for _, d := range denials {
		if d.Node != agent.Node || d.Time.IsZero() {
			t.Errorf("denial %+v: want node %s and a time", d, agent.Node)
		}
		if !strings.Contains(d.Refusal, d.HostPort()) || !strings.Contains(d.Refusal, "egress allowlist") && !strings.Contains(d.Refusal, "IP address") {
			t.Errorf("denial %+v: want the proxy's sentence naming %s and the allowlist", d, d.HostPort())
		}
		got[d.HostPort()] = d.Reason
	}
	for hp, reason := range wantReasons {
		if got[hp] != reason {
			t.Errorf("denial of %s: reason %q, want %q (all: %v)", hp, got[hp], reason, got)
		}
	}
	if len(denials) != len(wantReasons) || sum.EgressDeniedTotal != len(wantReasons) || len(sum.EgressDenials) != len(wantReasons) {
		t.Errorf("%d denials in the ledger, %d in the summary (total %d); want %d", len(denials), len(sum.EgressDenials), sum.EgressDeniedTotal, len(wantReasons))
	}
	// The proxy URL carries the node's secret: never in the recorded argv.
	for _, a := range agent.Argv {
		if strings.Contains(a, "http://") {
			t.Errorf("the recorded argv holds a proxy URL: %q", a)
		}
	}
}

// TestEgressProxyNetworkMissing: a missing proxy_network is a preflight error that says how to create it.
func TestEgressProxyNetworkMissing(t *testing.T) {
	f := newFixture(t)
	missing := "kewplan-test-nonet-" + randomSuffix()
	f.sandboxExtra = fmt.Sprintf("  egress {\n    proxy_network = %q\n  }\n", missing)
	cfg := f.config(`
node "%[1]sa" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  prompt = "hello"
}
`)
	_, _, err := f.apply(context.Background(), cfg)
	pe, ok := err.(*PreflightError)
	if !ok {
		t.Fatalf("err = %v, want a *PreflightError", err)
	}
	if !strings.Contains(pe.Error(), "docker network create "+missing) {
		t.Errorf("preflight error does not say how to create the network: %v", pe)
	}
}

// TestEgressProxyNotKewplan: a binary that is not a kewplan build cannot be the proxy; the refusal says how to
// build one (a dynamically linked kewplan can: TestEgressProxyDynamicKewplan).
func TestEgressProxyNotKewplan(t *testing.T) {
	f := newFixture(t)
	newEgressWorld(t, f)
	cfg := f.config(`
node "%[1]sa" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  prompt = "hello"
}
`)
	_, _, err := f.apply(context.Background(), cfg, func(o *ApplyOptions) { o.ProxyBinary = "/bin/sh" })
	if err == nil || !strings.Contains(err.Error(), "make build") {
		t.Fatalf("err = %v, want a refusal saying how to build kewplan", err)
	}
}

// deniedFor is the reason the summary recorded for a refused host:port, "" when none.
func deniedFor(sum *ApplySummary, hostport string) string {
	for _, d := range sum.EgressDenials {
		if d.HostPort() == hostport {
			return d.Reason
		}
	}
	return ""
}

// TestEgressPrivateHostsNamedOnly: without any test switch, a host named in private_hosts reaches its stub on the
// test network's private address, while another allowed name resolving to the same private address is refused,
// and the agent reads why.
func TestEgressPrivateHostsNamedOnly(t *testing.T) {
	f := newFixture(t)
	w := newEgressWorld(t, f)
	f.sandboxExtra = fmt.Sprintf("  egress {\n    proxy_network = %q\n    allow = [\"pypi.org\"]\n    private_hosts = [\"pypi.org\"]\n  }\n", w.proxyNet)
	cfg := f.config(`
node "%[1]sagent" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  ref    = "main"
  prompt = "mode=egress\ntargets=pypi.org:443,api.anthropic.com:443"
}
`)
	sum, _, err := f.apply(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	r := resultOf(t, sum, f.node("agent"))
	if !ledger.NodeSucceeded(r.Status) {
		t.Fatalf("node %s: %s (%s)", r.Node, r.Status, r.Reason)
	}
	rep := readEgressReport(t, r.StdoutLog)
	if got := rep.Results["pypi.org:443"]; got.Status != 200 || got.Greeting != "kewplan-stub" {
		t.Errorf("CONNECT pypi.org:443 (a private host) = %+v, want 200 through to the stub", got)
	}
	if got := rep.Results["api.anthropic.com:443"].Status; got != 403 {
		t.Errorf("CONNECT api.anthropic.com:443 (allowed, private address, not named) = %d, want 403", got)
	}
	if reason := deniedFor(sum, "api.anthropic.com:443"); reason != egress.ReasonRefusedAddress {
		t.Errorf("the denial of api.anthropic.com:443 was recorded as %q, want %q", reason, egress.ReasonRefusedAddress)
	}
	for _, d := range sum.EgressDenials {
		if d.HostPort() == "api.anthropic.com:443" && !strings.Contains(d.Refusal, "private_hosts") {
			t.Errorf("the refusal sentence does not say how to reach a private host: %q", d.Refusal)
		}
	}
}

// TestEgressSuggestRoundTrip: the allow entries egress suggest proposes from a run's denials, written into the
// node's egress block, let the next run through.
func TestEgressSuggestRoundTrip(t *testing.T) {
	f := newFixture(t)
	newEgressWorld(t, f)
	nodes := func(egressBlock string) string {
		return `
node "%[1]sagent" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  ref    = "main"
  prompt = "mode=egress\ntargets=pypi.org:443"
` + egressBlock + `}
`
	}
	allowPrivate := func(o *ApplyOptions) { o.EgressAllowPrivateAddresses = true }
	first, _, err := f.apply(context.Background(), f.config(nodes("")), allowPrivate)
	if err != nil {
		t.Fatal(err)
	}
	if reason := deniedFor(first, "pypi.org:443"); reason != egress.ReasonHostNotAllowed {
		t.Fatalf("first run: the denial of pypi.org:443 was recorded as %q, want %q", reason, egress.ReasonHostNotAllowed)
	}
	l, err := ledger.Open(statedir.Dir{Root: f.stateDir}.Ledger())
	if err != nil {
		t.Fatal(err)
	}
	denials, err := l.EgressDenials(first.RunID)
	l.Close()
	if err != nil {
		t.Fatal(err)
	}
	s := suggest.Build(first.RunID, []string{f.node("agent")}, denials)
	if len(s.Nodes) != 1 || s.Nodes[0].Node != f.node("agent") || strings.Join(s.Nodes[0].Allow, ",") != "pypi.org" {
		t.Fatalf("suggestion = %+v, want node %s allowed pypi.org", s, f.node("agent"))
	}
	quoted := make([]string, len(s.Nodes[0].Allow))
	for i, e := range s.Nodes[0].Allow {
		quoted[i] = strconv.Quote(e)
	}
	second, _, err := f.apply(context.Background(), f.config(nodes("  egress { allow = ["+strings.Join(quoted, ", ")+"] }\n")), allowPrivate)
	if err != nil {
		t.Fatal(err)
	}
	r := resultOf(t, second, f.node("agent"))
	if got := readEgressReport(t, r.StdoutLog).Results["pypi.org:443"]; got.Status != 200 || got.Greeting != "kewplan-stub" {
		t.Errorf("second run: CONNECT pypi.org:443 = %+v, want 200 through to the stub", got)
	}
	if second.EgressDeniedTotal != 0 {
		t.Errorf("second run: %d denials, want none: %+v", second.EgressDeniedTotal, second.EgressDenials)
	}
}

// floodHook parks many idle connections on the run's egress proxy when the first node starts.
type floodHook struct {
	NilHook
	once  sync.Once
	flood func(runID string)
}

func (h *floodHook) NodeStart(e NodeStartEvent) { h.once.Do(func() { h.flood(e.RunID) }) }

// TestEgressProxyFloodDoesNotStarve: more idle connections than the proxy holds in all, parked on it while a node
// runs, do not keep the next node from its model endpoint: the proxy evicts the oldest idle ones.
func TestEgressProxyFloodDoesNotStarve(t *testing.T) {
	f := newFixture(t)
	w := newEgressWorld(t, f)
	cfg := f.config(`
node "%[1]sfirst" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  ref    = "main"
  prompt = "mode=egress\ntargets=api.anthropic.com:443"
}

node "%[1]swork" {
  runner     = "claude-code"
  model      = "claude-sonnet-4-5"
  repo       = %[2]q
  ref        = "main"
  prompt     = "mode=egress\ntargets=api.anthropic.com:443"
  depends_on = [node.%[1]sfirst]
}
`)
	var parked []net.Conn
	defer func() {
		for _, c := range parked {
			c.Close()
		}
	}()
	hook := &floodHook{flood: func(runID string) {
		out, err := exec.Command("docker", "inspect", "-f", fmt.Sprintf(`{{(index .NetworkSettings.Networks %q).IPAddress}}`, w.proxyNet),
			docker.EgressProxyPrefix+runID).Output()
		ip := strings.TrimSpace(string(out))
		if err != nil || ip == "" {
			t.Errorf("the proxy's address on %s: %q, %v", w.proxyNet, ip, err)
			return
		}
		for i := 0; i < egress.DefaultMaxConns+200; i++ {
			c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, strconv.Itoa(egress.DefaultPort)), 10*time.Second)
			if err != nil {
				t.Errorf("flood connection %d: %v", i+1, err)
				return
			}
			parked = append(parked, c)
		}
	}}
	sum, _, err := f.apply(context.Background(), cfg, func(o *ApplyOptions) {
		o.EgressAllowPrivateAddresses = true
		o.Hooks = append(o.Hooks, hook)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(parked) != egress.DefaultMaxConns+200 {
		t.Fatalf("parked %d connections, want %d", len(parked), egress.DefaultMaxConns+200)
	}
	r := resultOf(t, sum, f.node("work"))
	if !ledger.NodeSucceeded(r.Status) {
		t.Fatalf("node %s: %s (%s)", r.Node, r.Status, r.Reason)
	}
	if got := readEgressReport(t, r.StdoutLog).Results["api.anthropic.com:443"]; got.Status != 200 || got.Greeting != "kewplan-stub" {
		t.Errorf("CONNECT api.anthropic.com:443 under the flood = %+v, want 200 through to the stub", got)
	}
	evicted := 0
	for _, c := range parked {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err == io.EOF {
			evicted++
		}
	}
	if evicted < 200 {
		t.Errorf("%d parked connections evicted, want at least 200 (the proxy holds %d)", evicted, egress.DefaultMaxConns)
	}
}
