package egress

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

// budgetRig is a proxy in front of the stand-in (every JSON answer: 3 input and 5 output tokens) with fix
// (Anthropic, max_tokens 20) and review (OpenAI-shaped, max_turns 2, a price). A call's body {"max_tokens":1}
// reserves 5 tokens (1 of output, 4 of input for its 16 bytes).
func budgetRig(t *testing.T) (*brokerRig, *httptest.Server) {
	t.Helper()
	ca := newTestCA(t)
	up := newStandIn(t, ca)
	g := &brokerRig{up: up, log: &syncBuffer{}, fixEP: fmt.Sprintf("api.anthropic.com:%d", up.port), revEP: fmt.Sprintf("openrouter.ai:%d", up.port)}
	cfg := &Config{Listen: "127.0.0.1:0", ControlSecret: ctlSecret, UpstreamCAPEM: ca.pem, Nodes: []NodeConfig{
		{Name: "fix", Secret: secretFix, Broker: &BrokerConfig{API: BrokerAPIAnthropic, Paths: anthropicTestPaths, Endpoints: []string{g.fixEP},
			Budget:      &BrokerBudget{MaxTokens: 20, Attempts: 2, Where: "fix.hcl"},
			Credentials: []BrokerCredential{{Name: "ANTHROPIC_API_KEY", Placeholder: phFixKey, Value: realFixKey, Header: "x-api-key"}}}},
		{Name: "review", Secret: secretReview, Broker: &BrokerConfig{API: BrokerAPIOpenAI, Paths: openAITestPaths, Endpoints: []string{g.revEP},
			Price: &BrokerPrice{Input: 1e6, Output: 1e6}, Budget: &BrokerBudget{MaxTurns: 2, MaxUSD: 100},
			Credentials: []BrokerCredential{{Name: "OPENROUTER_API_KEY", Placeholder: phReview, Value: realReview, Header: "Authorization", Scheme: "Bearer"}}}},
	}}
	raw, _ := json.Marshal(cfg)
	if _, err := ParseConfig(raw); err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	s, err := NewServer(cfg, g.log, Options{
		Resolve: func(context.Context, string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		},
		AddressAllowed: func(a netip.Addr) bool { return a.IsLoopback() },
	})
	if err != nil {
		t.Fatal(err)
	}
	g.server, g.proxy, g.client = s, httptest.NewServer(s), &http.Client{Transport: &http.Transport{Proxy: nil}}
	t.Cleanup(func() { close(up.gate); g.proxy.Close() })
	return g, g.proxy
}

// TestBrokerRefusesModelCallsPastABudget: the broker sums what the provider reported per node and refuses the
// next model call once a cap is crossed, in the API's own error shape, naming the cap and where to raise it; a
// GET is not a model call and passes.
func TestBrokerRefusesModelCallsPastABudget(t *testing.T) {
	g, _ := budgetRig(t)
	path := map[string]string{http.MethodPost: "/v1/messages", http.MethodGet: "/v1/models"}
	fix := func(method string) (*http.Response, []byte) {
		return g.do(t, method, g.url("fix", g.fixEP, path[method]), map[string]string{"x-api-key": phFixKey}, `{"max_tokens":1}`)
	}
	for i := range 2 { // 8 tokens, then 16: with 5 reserved, over max_tokens 20
		if res, b := fix(http.MethodPost); res.StatusCode != 200 {
			t.Fatalf("call %d: %s %s", i+1, res.Status, b)
		}
	}
	res, b := fix(http.MethodPost)
	var anth struct {
		Type  string `json:"type"`
		Error struct{ Type, Message string }
	}
	if res.StatusCode != http.StatusPaymentRequired || json.Unmarshal(b, &anth) != nil || anth.Type != "error" || anth.Error.Type != "billing_error" {
		t.Fatalf("third call: %s %s, want 402 in Anthropic's error shape", res.Status, b)
	}
	if want := "could take node fix past its budget max_tokens = 20: the proxy metered 16 tokens, open calls reserve 0 and this call reserves 5 (1 of output at most and about 4 of input), 21 in all; lower the request's max_tokens, or raise budget { max_tokens } in fix.hcl."; !strings.Contains(anth.Error.Message, want) {
		t.Errorf("refusal %q does not say %q", anth.Error.Message, want)
	}
	if res, b := fix(http.MethodGet); res.StatusCode != 200 {
		t.Errorf("a GET below the cap: %s %s", res.Status, b)
	}

	review := func() (*http.Response, []byte) {
		return g.do(t, http.MethodPost, g.url("review", g.revEP, "/api/v1/chat/completions"), map[string]string{"Authorization": "Bearer " + phReview}, `{"max_tokens":1}`)
	}
	for i := range 2 {
		if res, b := review(); res.StatusCode != 200 {
			t.Fatalf("review call %d: %s %s", i+1, res.Status, b)
		}
	}
	res, b = review()
	var oai struct {
		Error struct {
			Message, Type string
			Code          int
		}
	}
	if res.StatusCode != http.StatusPaymentRequired || json.Unmarshal(b, &oai) != nil || oai.Error.Code != 402 {
		t.Fatalf("third review call: %s %s, want 402 in OpenAI's error shape", res.Status, b)
	}
	// 2 calls at $1e6/Mtok for 8 tokens each: $16, and $5 reserved, within max_usd 100; max_turns refuses.
	if want := "node review reached its budget max_turns = 2 (this would be model call 3); raise budget { max_turns } in the configuration"; !strings.Contains(oai.Error.Message, want) {
		t.Errorf("refusal %q does not say %q", oai.Error.Message, want)
	}

	g.proxy.Close()
	var calls, refused int
	var tokens int64
	for _, d := range brokerDecisions(t, g.log, KindBroker) {
		if d.Node != "fix" || d.Meter == nil {
			continue
		}
		if d.Meter.ModelCall {
			calls++
		}
		if d.Reason == ReasonBudgetExceeded {
			refused++
			if d.Meter.Cap != "max_tokens" || d.Meter.Limit != 20 || d.Meter.Value != 21 || d.Allowed {
				t.Errorf("refusal line %+v", d.Meter)
			}
		}
		if d.Meter.Usage != nil {
			tokens += d.Meter.Usage.Tokens()
		}
	}
	if calls != 3 || refused != 1 || tokens != 24 {
		t.Errorf("fix's decision lines: %d model calls, %d refused, %d tokens metered; want 3, 1, 24 (the GET metered too)", calls, refused, tokens)
	}
}

// TestBrokerBudgetPerAttempt: once apply says a retry starts (the control endpoint), the node's sums and caps
// start again from zero, as apply's budget does for each attempt, and every decision line names its attempt.
func TestBrokerBudgetPerAttempt(t *testing.T) {
	g, _ := budgetRig(t)
	addr := strings.TrimPrefix(g.proxy.URL, "http://")
	fix := func() int {
		res, _ := g.do(t, http.MethodPost, g.url("fix", g.fixEP, "/v1/messages"), map[string]string{"x-api-key": phFixKey}, `{"max_tokens":1}`)
		return res.StatusCode
	}
	// Attempt 1: 8 tokens, 16, then refused over max_tokens 20 (5 reserved).
	if got := []int{fix(), fix(), fix()}; got[0] != 200 || got[1] != 200 || got[2] != http.StatusPaymentRequired {
		t.Fatalf("attempt 1's calls: %v, want 200 200 402", got)
	}
	ctx := context.Background()
	if err := StartAttemptAt(ctx, addr, ctlSecret, "fix", 2); err != nil {
		t.Fatalf("StartAttemptAt: %v", err)
	}
	if err := StartAttemptAt(ctx, addr, "wrong-secret-0123456789abcdef0123456789", "fix", 3); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("StartAttemptAt with a wrong secret: %v, want a 401 refusal", err)
	}
	if err := StartAttemptAt(ctx, addr, ctlSecret, "ghost", 2); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("StartAttemptAt of an unknown node: %v, want 404", err)
	}
	// Attempt 2 starts from zero: two calls pass again, the third is refused.
	if got := []int{fix(), fix(), fix()}; got[0] != 200 || got[1] != 200 || got[2] != http.StatusPaymentRequired {
		t.Fatalf("attempt 2's calls: %v, want 200 200 402", got)
	}
	g.proxy.Close()
	var attempts []int
	for _, d := range brokerDecisions(t, g.log, KindBroker) {
		if d.Node == "fix" {
			attempts = append(attempts, d.Attempt)
		}
	}
	if want := []int{1, 1, 1, 2, 2, 2}; fmt.Sprint(attempts) != fmt.Sprint(want) {
		t.Errorf("fix's decision lines name attempts %v, want %v", attempts, want)
	}
	var control []string
	for _, d := range brokerDecisions(t, g.log, KindControl) {
		control = append(control, fmt.Sprintf("%s %d %d %v", d.Reason, d.Status, d.Attempt, d.Allowed))
	}
	want := []string{ReasonAttemptByControl + " 204 2 true", ReasonControlAuth + " 401 0 false", ReasonControlUnknown + " 404 0 false"}
	if fmt.Sprint(control) != fmt.Sprint(want) {
		t.Errorf("control lines %q, want %q", control, want)
	}
}

// TestBrokerTurnsCap: max_turns counts model calls at the proxy, whatever the answers say.
func TestBrokerTurnsCap(t *testing.T) {
	var m, node nodeMeter
	b := &BrokerBudget{MaxTurns: 3}
	for i := range 3 {
		if c := admitReservation(&m, &node, b, Reserved{}); c.cap != "" {
			t.Fatalf("call %d refused: %s", i+1, c.cap)
		}
	}
	if c := admitReservation(&m, &node, b, Reserved{}); c.cap != "max_turns" || c.limit != 3 || c.value != 4 {
		t.Errorf("fourth call: %+v, want max_turns 3 4", c)
	}
	if got := budgetSentence("fix", b, "max_turns", 3, 4); !strings.Contains(got, "max_turns = 3 (this would be model call 4); raise budget { max_turns }") {
		t.Errorf("sentence %q", got)
	}
}

// TestBudgetSentenceSmallCap: a cap under a cent and what the proxy metered read as what they are, never as zero.
func TestBudgetSentenceSmallCap(t *testing.T) {
	b := &BrokerBudget{MaxUSD: 0.00005}
	for _, tc := range []struct {
		limit, value float64
		want         string
	}{
		{0.00005, 0.0000612, "max_usd = 0.00005 (proxy metered $0.0000612)"},
		{1, 1.0000001, "max_usd = 1.00 (proxy metered $1.0000001)"},
	} {
		if got := budgetSentence("fix", b, "max_usd", tc.limit, tc.value); !strings.Contains(got, tc.want) {
			t.Errorf("budgetSentence(%v, %v) = %q, want it to say %q", tc.limit, tc.value, got, tc.want)
		}
	}
}
