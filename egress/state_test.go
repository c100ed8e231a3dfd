package egress

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// stateRig is a proxy whose broker keeps its state file in a test directory, in front of the stand-in; restart
// gives a new proxy the same configuration, as apply does when the first one dies.
type stateRig struct {
	*brokerRig
	raw []byte
}

func newStateRig(t *testing.T, fixBudget *BrokerBudget) *stateRig {
	t.Helper()
	ca := newTestCA(t)
	up := newStandIn(t, ca)
	g := &brokerRig{up: up, log: &syncBuffer{}, fixEP: fmt.Sprintf("api.anthropic.com:%d", up.port), revEP: fmt.Sprintf("openrouter.ai:%d", up.port)}
	cfg := &Config{Listen: "127.0.0.1:0", ControlSecret: ctlSecret, UpstreamCAPEM: ca.pem, StateFile: filepath.Join(t.TempDir(), "broker-state.json"),
		Nodes: []NodeConfig{
			{Name: "fix", Secret: secretFix, Broker: &BrokerConfig{API: BrokerAPIAnthropic, Paths: anthropicTestPaths, Endpoints: []string{g.fixEP},
				Budget: fixBudget, MaxOutputTokens: 1000,
				Credentials: []BrokerCredential{{Name: "ANTHROPIC_API_KEY", Placeholder: phFixKey, Value: realFixKey, Header: "x-api-key"}}}},
			{Name: "review", Secret: secretReview, Broker: &BrokerConfig{API: BrokerAPIOpenAI, Paths: openAITestPaths, Endpoints: []string{g.revEP},
				Credentials: []BrokerCredential{{Name: "OPENROUTER_API_KEY", Placeholder: phReview, Value: realReview, Header: "Authorization", Scheme: "Bearer"}}}},
		}}
	raw, _ := json.Marshal(cfg)
	r := &stateRig{brokerRig: g, raw: raw}
	g.client = &http.Client{Transport: &http.Transport{Proxy: nil}}
	if err := r.start(t); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-up.gate:
		default:
			close(up.gate)
		}
	})
	return r
}

// start runs a proxy from the rig's configuration (parsed again, as a new process reads it from stdin).
func (r *stateRig) start(t *testing.T) error {
	t.Helper()
	cfg, err := ParseConfig(r.raw)
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	s, err := NewServer(cfg, r.log, Options{
		Resolve: func(context.Context, string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		},
		AddressAllowed: func(a netip.Addr) bool { return a.IsLoopback() },
	})
	if err != nil {
		return err
	}
	r.server, r.proxy = s, httptest.NewServer(s)
	t.Cleanup(r.proxy.Close)
	return nil
}

// TestBrokerStateSurvivesARestart: a node's meters go on across a new proxy started with the same configuration:
// the tokens it spent before count against its cap after, its attempt and its end are kept, and the placeholders
// of the configuration still work.
func TestBrokerStateSurvivesARestart(t *testing.T) {
	g := newStateRig(t, &BrokerBudget{MaxTokens: 20, Attempts: 3, Where: "fix.hcl"})
	if res, r := g.fixCall(t, `{"max_tokens":1}`); res.StatusCode != 200 { // 8 tokens
		t.Fatalf("first call: %s %+v", res.Status, r)
	}
	g.proxy.Close() // waits for the call's handler: its settlement is on disk
	if err := g.start(t); err != nil {
		t.Fatal(err)
	}
	if !g.server.Restored() {
		t.Fatal("the second proxy did not go on from the state file")
	}
	if res, r := g.fixCall(t, `{"max_tokens":1}`); res.StatusCode != 200 { // 16
		t.Fatalf("second call, after the restart: %s %+v", res.Status, r)
	}
	res, r := g.fixCall(t, `{"max_tokens":1}`)
	if want := "the proxy metered 16 tokens"; res.StatusCode != http.StatusPaymentRequired || !strings.Contains(r.Error.Message, want) {
		t.Fatalf("third call: %s %q, want the cap judged on the spend before the restart too (%q)", res.Status, r.Error.Message, want)
	}

	// An attempt started and a node ended before a restart stay so after it.
	if !g.server.StartAttempt("fix", 2) || !g.server.EndNode("review") {
		t.Fatal("StartAttempt or EndNode refused")
	}
	g.proxy.Close()
	if err := g.start(t); err != nil {
		t.Fatal(err)
	}
	fix := g.server.broker.nodes["fix"]
	if got := fix.meter.Load().snapshot(); got.Number != 2 || got.Calls != 0 {
		t.Errorf("fix's attempt after the restart: %+v, want attempt 2 with no call", got)
	}
	if got := fix.total.snapshot(); got.Calls != 2 || got.Usage.Tokens() != 16 {
		t.Errorf("fix's total after the restart: %+v, want its 2 calls and 16 tokens", got)
	}
	if ended, _ := g.server.nodeEnded(g.server.broker.nodes["review"]); !ended {
		t.Error("review is no longer ended after the restart")
	}
	res, b := g.do(t, http.MethodPost, g.url("review", g.revEP, "/api/v1/chat/completions"), map[string]string{"Authorization": "Bearer " + phReview}, `{"max_tokens":1}`)
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("review's call after the restart: %s %s, want it refused as ended", res.Status, b)
	}
}

// TestBrokerStateKeepsAnOpenCallAtItsReservation: a call still open when its proxy dies counts, for the next
// proxy, as unsettled at its reservation: the worst case it was admitted on.
func TestBrokerStateKeepsAnOpenCallAtItsReservation(t *testing.T) {
	g := newStateRig(t, &BrokerBudget{MaxTokens: 1500})
	res, _ := g.streamCall(t, "gate", `{"max_tokens":500,"stream":true}`) // 500 + 8 reserved, open
	defer res.Body.Close()
	if err := g.start(t); err != nil { // the first proxy is as good as dead: the new one reads its file
		t.Fatal(err)
	}
	fix := g.server.broker.nodes["fix"]
	got := fix.meter.Load().snapshot()
	if got.Calls != 1 || got.Unsettled != 1 || got.OpenCalls != 0 || got.Usage.Tokens() != 508 {
		t.Errorf("the restored attempt: %+v, want one unsettled call at its 508 tokens reserved", got)
	}
	if res, r := g.fixCall(t, `{"max_tokens":1000}`); res.StatusCode != http.StatusPaymentRequired || !strings.Contains(r.Error.Message, "the proxy metered 508 tokens") {
		t.Errorf("after the restart: %s %q, want the open call's reservation kept (508 metered)", res.Status, r.Error.Message)
	}
}

// TestBrokerStateRefusesAStrangeFile: a state file that is not the broker's, or names a node the configuration
// does not broker, stops the proxy from starting rather than let it forget what was spent.
func TestBrokerStateRefusesAStrangeFile(t *testing.T) {
	g := newStateRig(t, nil)
	cfg, _ := ParseConfig(g.raw)
	for _, tc := range []struct{ content, want string }{
		{`{"nodes":{"other":{"attempt":{"calls":1,"usage":{}},"total":{"calls":1,"usage":{}}}}}`, `names node "other", which the configuration does not broker`},
		{`{"nodes":{},"budget":1}`, "is not the broker's state"},
		{`not json`, "is not the broker's state"},
	} {
		if err := os.WriteFile(cfg.StateFile, []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := NewServer(cfg, nil, Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("state %s: NewServer error %v, want %q", tc.content, err, tc.want)
		}
	}
}
