package executor

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kewplan/kewplan/executor/engine"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/statedir"
	"github.com/kewplan/kewplan/internal/testtools/testkit"
)

// testTLS is a CA and a leaf certificate for host, signed by it, in PEM.
func testTLS(t testing.TB, host string) (caPEM, certPEM, keyPEM []byte) { return testkit.TLS(t, host) }

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// modelReport is the fake agent's mode=model system event.
type modelReport struct {
	BaseURLSet       bool     `json:"base_url_set"`
	KeyIsPlaceholder bool     `json:"key_is_placeholder"`
	EnvSHA256        []string `json:"env_sha256"`
	Plain            struct {
		Status int    `json:"status"`
		Body   string `json:"body"`
		Error  string `json:"error"`
	} `json:"plain"`
	Streamed struct {
		Status int      `json:"status"`
		Events []string `json:"events"`
		Error  string   `json:"error"`
	} `json:"streamed"`
}

func readModelReport(t *testing.T, path string) modelReport {
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
			modelReport
		}
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Subtype == "model" {
			return ev.modelReport
		}
	}
	t.Fatalf("no model report in %s", path)
	return modelReport{}
}

// modelStandIn starts the TLS stand-in for api.anthropic.com (the test image's --model-stub, with args after its
// certificate) on a network of its own, which the sandbox names as the proxy's and whose CA the proxy trusts; it
// returns the stand-in's output.
func (f *fixture) modelStandIn(ctx context.Context, args ...string) *lockedBuffer {
	t := f.t
	t.Helper()
	caPEM, certPEM, keyPEM := testTLS(t, "api.anthropic.com")
	proxyNet := "kewplan-test-bpn-" + randomSuffix()
	if _, err := f.eng.CreateBridge(ctx, proxyNet, false, map[string]string{"kewplan.test": "1"}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.eng.RemoveNetwork(context.Background(), proxyNet) })
	out := &lockedBuffer{}
	cmd := append([]string{"--model-stub", ":443", base64.StdEncoding.EncodeToString(certPEM), base64.StdEncoding.EncodeToString(keyPEM)}, args...)
	stub, err := f.eng.StartService(ctx, engine.ServiceSpec{
		Name: "kewplan-test-model-" + randomSuffix(), Image: f.image, Cmd: cmd,
		Labels: map[string]string{"kewplan.test": "1"}, Networks: []string{proxyNet},
		Aliases: map[string][]string{proxyNet: {"api.anthropic.com"}},
	}, nil, out, out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stub.Stop() })
	if err := os.WriteFile(filepath.Join(f.dir, "ca.pem"), caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	f.sandboxExtra = fmt.Sprintf("  egress {\n    proxy_network    = %q\n    upstream_ca_file = \"ca.pem\"\n  }\n", proxyNet)
	return out
}

// brokered is the apply options of a test with the model stand-in: its network's private addresses reachable
// through the proxy, and key as the credential the proxy brokers.
func brokered(key string) func(*ApplyOptions) {
	return func(o *ApplyOptions) {
		o.EgressAllowPrivateAddresses = true
		o.Environ = append(os.Environ(), "ANTHROPIC_API_KEY="+key)
	}
}

// testAPIKey is a fresh stand-in for a real Anthropic key.
func testAPIKey() string { return "sk-ant-api03-" + randomSuffix() + randomSuffix() + "-kewplan-test" }

// brokerRequests are a run's brokered requests as the ledger keeps them.
func (f *fixture) brokerRequests(runID string) []ledger.BrokerRequest {
	return readLedger(f, func(l *ledger.Ledger) ([]ledger.BrokerRequest, error) { return l.BrokerRequests(runID) })
}

// meters are both meters of a run's brokered attempts, from the ledger.
func (f *fixture) meters(runID string) []ledger.NodeMeters {
	return readLedger(f, func(l *ledger.Ledger) ([]ledger.NodeMeters, error) { return l.Meters(runID) })
}

// readLedger reads one thing from the fixture's ledger.
func readLedger[T any](f *fixture, read func(*ledger.Ledger) (T, error)) T {
	f.t.Helper()
	l, err := ledger.Open(statedir.Dir{Root: f.stateDir}.Ledger())
	if err != nil {
		f.t.Fatal(err)
	}
	defer l.Close()
	v, err := read(l)
	if err != nil {
		f.t.Fatal(err)
	}
	return v
}

func sha256Hex(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

// TestBrokeredCredentialsEndToEnd: a brokered Claude Code node calls its model API (a TLS stand-in for
// api.anthropic.com on a test network, trusted through upstream_ca_file) with the placeholder it holds; kewplan's
// proxy adds the real key. The upstream receives the real key on every request and never the placeholder; nothing
// in the container's environment holds the real key; a plain and a streamed answer reach the agent; the ledger
// records each brokered request. A forwarded node in the same apply holds the value, as before.
func TestBrokeredCredentialsEndToEnd(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	stubOut := f.modelStandIn(ctx)
	cfg := f.config(`
node "%[1]sbrok" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  role   = "reviewer"
  prompt = "mode=model\nverdict=approve"
}
node "%[1]sfwd" {
  runner      = "claude-code"
  model       = "claude-sonnet-4-5"
  repo        = %[2]q
  role        = "reviewer"
  credentials = "forward"
  prompt      = "mode=model\nverdict=approve"
}
`)
	realKey := testAPIKey()
	sum, _, err := f.apply(ctx, cfg, brokered(realKey))
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	brok, fwd := resultOf(t, sum, f.node("brok")), resultOf(t, sum, f.node("fwd"))

	// The brokered node: a placeholder inside, the real key outside, both answers through the broker.
	rep := readModelReport(t, brok.StdoutLog)
	if !rep.BaseURLSet || !rep.KeyIsPlaceholder {
		t.Errorf("brokered node: base URL set %v, key is a placeholder %v", rep.BaseURLSet, rep.KeyIsPlaceholder)
	}
	if slices.Contains(rep.EnvSHA256, sha256Hex(realKey)) {
		t.Error("the brokered node's environment (or /proc/1/environ) holds the real key")
	}
	if rep.Plain.Status != 200 || !strings.Contains(rep.Plain.Body, "hello from the stub") {
		t.Errorf("plain answer through the broker: %d %q %s", rep.Plain.Status, rep.Plain.Body, rep.Plain.Error)
	}
	if want := []string{"message_start", "content_block_delta", "message_delta", "message_stop"}; rep.Streamed.Status != 200 || !slices.Equal(rep.Streamed.Events, want) {
		t.Errorf("streamed answer through the broker: %d %v, want %v (%s)", rep.Streamed.Status, rep.Streamed.Events, want, rep.Streamed.Error)
	}
	if !strings.Contains(strings.Join(brok.Argv, " "), "-e ANTHROPIC_BASE_URL") {
		t.Errorf("the brokered node's argv does not name its base-URL variable: %v", brok.Argv)
	}
	// The upstream saw the real key on every request, never a placeholder.
	var requests int
	for _, line := range strings.Split(stubOut.String(), "\n") {
		if !strings.HasPrefix(line, "request ") {
			continue
		}
		requests++
		if !strings.Contains(line, "key_sha256="+sha256Hex(realKey)) || strings.Contains(line, "placeholder=true") {
			t.Errorf("the upstream received something other than the real key: %s", line)
		}
	}
	if requests < 2 {
		t.Errorf("the upstream saw %d requests, want the brokered node's 2 at least:\n%s", requests, stubOut.String())
	}
	// The ledger records each brokered request; the stored logs never hold the key.
	reqs := f.brokerRequests(sum.RunID)
	ok200 := 0
	for _, r := range reqs {
		if r.Node == f.node("brok") && r.Status == 200 && r.Attempt == 1 && r.Credential == "ANTHROPIC_API_KEY" && r.Host == "api.anthropic.com" {
			ok200++
		}
	}
	if ok200 != 2 {
		t.Errorf("ledger brokered requests %+v, want 2 answered 200 for the brokered node", reqs)
	}
	for _, p := range []string{brok.StdoutLog, brok.StderrLog} {
		if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(realKey)) {
			t.Errorf("%s holds the real key", p)
		}
	}

	// The forwarded node holds the value, as the contract describes, and has no broker.
	frep := readModelReport(t, fwd.StdoutLog)
	if frep.KeyIsPlaceholder || frep.BaseURLSet || !slices.Contains(frep.EnvSHA256, sha256Hex(realKey)) {
		t.Errorf("forwarded node: placeholder %v, base URL %v, holds the key %v", frep.KeyIsPlaceholder, frep.BaseURLSet, slices.Contains(frep.EnvSHA256, sha256Hex(realKey)))
	}
	if !ledger.NodeSucceeded(brok.Status) || !ledger.NodeSucceeded(fwd.Status) {
		t.Errorf("statuses: brokered %s (%s), forwarded %s (%s)", brok.Status, brok.Reason, fwd.Status, fwd.Reason)
	}
}
