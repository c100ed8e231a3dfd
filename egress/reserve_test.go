package egress

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The paths of the test rigs' brokered nodes, as runners.BrokeredAPIPaths lists them for each API.
var (
	anthropicTestPaths = []BrokerPath{{Method: "POST", Path: "/v1/messages", ModelCall: true}, {Method: "POST", Path: "/v1/messages/count_tokens"},
		{Method: "GET", Path: "/v1/models"}, {Method: "GET", Path: "/v1/models/{id}"}}
	openAITestPaths = []BrokerPath{{Method: "POST", Path: "/api/v1/chat/completions", ModelCall: true}, {Method: "GET", Path: "/api/v1/models"}}
)

// brokerPrefix is the broker path of node up to its endpoint: /broker/<node>/<identity>/.
func brokerPrefix(node, secret string) string {
	return BrokerPathPrefix + node + "/" + BrokerIdentity(node, secret) + "/"
}

// reserveRig is budgetRig with the fix node's budget and model maximum given.
func reserveRig(t *testing.T, fixBudget *BrokerBudget, maxOutput int64, price *BrokerPrice) *brokerRig {
	t.Helper()
	ca := newTestCA(t)
	up := newStandIn(t, ca)
	g := &brokerRig{up: up, log: &syncBuffer{}, fixEP: fmt.Sprintf("api.anthropic.com:%d", up.port), revEP: fmt.Sprintf("openrouter.ai:%d", up.port)}
	cfg := &Config{Listen: "127.0.0.1:0", ControlSecret: ctlSecret, UpstreamCAPEM: ca.pem, Nodes: []NodeConfig{
		{Name: "fix", Secret: secretFix, Broker: &BrokerConfig{API: BrokerAPIAnthropic, Paths: anthropicTestPaths, Endpoints: []string{g.fixEP},
			Budget: fixBudget, MaxOutputTokens: maxOutput, Price: price,
			Credentials: []BrokerCredential{{Name: "ANTHROPIC_API_KEY", Placeholder: phFixKey, Value: realFixKey, Header: "x-api-key"}}}},
		{Name: "review", Secret: secretReview, Broker: &BrokerConfig{API: BrokerAPIOpenAI, Paths: openAITestPaths, Endpoints: []string{g.revEP},
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
	t.Cleanup(func() {
		select {
		case <-up.gate:
		default:
			close(up.gate)
		}
		g.proxy.Close()
	})
	return g
}

func (g *brokerRig) fixCall(t *testing.T, body string) (*http.Response, refusal) {
	t.Helper()
	res, b := g.do(t, http.MethodPost, g.url("fix", g.fixEP, "/v1/messages"), map[string]string{"x-api-key": phFixKey}, body)
	var r refusal
	if res.StatusCode != 200 {
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("refusal %s is not JSON: %v", b, err)
		}
	}
	return res, r
}

// TestBrokerReservesTheWorstCase: a model call is admitted only when its reservation (max_tokens bounded by the
// model's maximum, plus a token per 4 bytes of body), the node's sums and its open reservations stay within the
// caps; the refusal names the cap, the reservation and the figure; a call that names no max_tokens reserves the
// model's maximum.
func TestBrokerReservesTheWorstCase(t *testing.T) {
	g := reserveRig(t, &BrokerBudget{MaxTokens: 100, Where: "fix.hcl"}, 1000, nil)
	body := `{"max_tokens":60,"x":"abcdefghijklmnopqrstuvw"}` // 46 bytes: 12 input tokens, 72 reserved
	if res, r := g.fixCall(t, body); res.StatusCode != 200 {
		t.Fatalf("first call: %s %+v, want it admitted (71 reserved of 100)", res.Status, r)
	}
	// Settled to 8 (3 + 5): 8 + 72 = 80, admitted again; then 16 + 72 = 88; then 24 + 72 = 96; then 32 + 72 > 100.
	for i := range 3 {
		if res, r := g.fixCall(t, body); res.StatusCode != 200 {
			t.Fatalf("call %d: %s %+v", i+2, res.Status, r)
		}
	}
	res, r := g.fixCall(t, body)
	if res.StatusCode != http.StatusPaymentRequired || r.Type != "error" || r.Error.Type != "billing_error" {
		t.Fatalf("fifth call: %s %+v, want 402 in Anthropic's shape", res.Status, r)
	}
	want := "could take node fix past its budget max_tokens = 100: the proxy metered 32 tokens, open calls reserve 0 and this call reserves 72 (60 of output at most and about 12 of input), 104 in all; lower the request's max_tokens, or raise budget { max_tokens } in fix.hcl."
	if !strings.Contains(r.Error.Message, want) {
		t.Errorf("refusal %q\ndoes not say %q", r.Error.Message, want)
	}
	// No max_tokens: the model's maximum (1,000) is reserved, and refused at once.
	g2 := reserveRig(t, &BrokerBudget{MaxTokens: 500}, 1000, nil)
	if res, r := g2.fixCall(t, `{}`); res.StatusCode != http.StatusPaymentRequired || !strings.Contains(r.Error.Message, "this call reserves 1,001 (1,000 of output at most") {
		t.Errorf("a call without max_tokens: %s %q, want 402 reserving the model's maximum", res.Status, r.Error.Message)
	}
	// A max_tokens above the model's maximum reserves the maximum.
	if res, r := g2.fixCall(t, `{"max_tokens":99999999}`); res.StatusCode != http.StatusPaymentRequired || !strings.Contains(r.Error.Message, "(1,000 of output at most") {
		t.Errorf("a call over the model's maximum: %s %q", res.Status, r.Error.Message)
	}
	// With a price, max_usd is judged on the reservation's cost.
	g3 := reserveRig(t, &BrokerBudget{MaxUSD: 0.001}, 1000, &BrokerPrice{Input: 3, Output: 15})
	if res, r := g3.fixCall(t, `{"max_tokens":100}`); res.StatusCode != http.StatusPaymentRequired ||
		!strings.Contains(r.Error.Message, "max_usd = 0.001: the proxy metered $0.00, open calls reserve $0.00 and this call reserves $0.001515 (100 tokens of output at most and about 5 of input), $0.001515 in all") {
		t.Errorf("max_usd reservation: %s %q", res.Status, r.Error.Message)
	}
	g.proxy.Close()
	var lines []*Meter
	for _, d := range brokerDecisions(t, g.log, KindBroker) {
		lines = append(lines, d.Meter)
	}
	if len(lines) != 5 || lines[0].Reserved == nil || lines[0].Reserved.Tokens() != 72 || lines[0].Unsettled || lines[0].Usage.Tokens() != 8 ||
		lines[4].Cap != "max_tokens" || lines[4].Value != 104 {
		t.Errorf("decision lines' meters %s, want 4 settled at 8 tokens with 72 reserved and a refusal at 104", jsonOf(lines))
	}
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// streamCall starts a streamed call of fix (the stand-in's mode) and returns its reader once message_start arrived.
func (g *brokerRig) streamCall(t *testing.T, mode, body string) (*http.Response, *bufio.Reader) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, g.url("fix", g.fixEP, "/v1/messages?stream="+mode), strings.NewReader(body))
	req.Header.Set("x-api-key", phFixKey)
	res, err := g.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(res.Body)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("before message_start: %v", err)
		}
		if strings.HasPrefix(line, "data:") {
			return res, r
		}
	}
}

// TestBrokerMetersAnAnswerTheAgentHungUpOn: an agent that closes its connection right after message_start is
// still metered at the provider's final figure, read after it went away; an answer that ends without the final
// usage keeps its reservation and says it is unsettled.
func TestBrokerMetersAnAnswerTheAgentHungUpOn(t *testing.T) {
	g := reserveRig(t, &BrokerBudget{MaxTokens: 10_000}, 1000, nil)
	res, _ := g.streamCall(t, "gate", `{"max_tokens":500,"stream":true}`)
	res.Body.Close() // hang up before message_delta
	g.client.CloseIdleConnections()
	close(g.up.gate) // the provider sends the rest: output_tokens 42
	g.proxy.Close()  // waits for the handler
	d := brokerDecisions(t, g.log, KindBroker)
	if len(d) != 1 || d[0].Meter == nil || d[0].Meter.Unsettled || d[0].Meter.Usage == nil || d[0].Meter.Usage.OutputTokens != 42 {
		t.Fatalf("decision %s, want one settled at the provider's 42 output tokens", jsonOf(d))
	}

	g2 := reserveRig(t, &BrokerBudget{MaxTokens: 1500}, 1000, nil)
	res, _ = g2.streamCall(t, "cut", `{"max_tokens":500,"stream":true}`)
	close(g2.up.gate) // the provider cuts the stream: no message_delta
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	// The reservation stays: 500 + 8 (32 bytes) of the 1,500, so a call reserving 1,005 more is refused.
	if res, r := g2.fixCall(t, `{"max_tokens":1000}`); res.StatusCode != http.StatusPaymentRequired || !strings.Contains(r.Error.Message, "the proxy metered 508 tokens") {
		t.Errorf("after an unsettled call: %s %q, want the reservation kept (508 metered)", res.Status, r.Error.Message)
	}
	g2.proxy.Close()
	d = brokerDecisions(t, g2.log, KindBroker)
	want := &Meter{ModelCall: true, Reserved: &Reserved{InputTokens: 8, OutputTokens: 500}, Unsettled: true,
		Usage: &BrokerUsage{InputTokens: 8, OutputTokens: 500, CostSource: CostUnknown, Reported: true}}
	if len(d) != 2 {
		t.Fatalf("decisions %s", jsonOf(d))
	}
	if diff := cmp.Diff(want, d[0].Meter); diff != "" {
		t.Errorf("cut answer's meter (-want +got):\n%s", diff)
	}
}

// TestBrokerForcesUsageReporting: an OpenAI-style streamed call is sent with stream_options.include_usage = true
// (the rest of the body as it was); one that turns usage off is refused; a body the broker does not rewrite reaches
// the provider byte for byte.
func TestBrokerForcesUsageReporting(t *testing.T) {
	g := reserveRig(t, nil, 1000, nil)
	review := func(body string) (*http.Response, []byte) {
		return g.do(t, http.MethodPost, g.url("review", g.revEP, "/api/v1/chat/completions"), map[string]string{"Authorization": "Bearer " + phReview}, body)
	}
	for _, body := range []string{`{"model":"m","stream":true,"messages":[]}`, `{"stream":true,"stream_options":{"x":1}}`} {
		if res, b := review(body); res.StatusCode != 200 {
			t.Fatalf("%s: %s %s", body, res.Status, b)
		}
	}
	plain := "{\"model\": \"m\",\n \"messages\": [] }"
	if res, b := review(plain); res.StatusCode != 200 {
		t.Fatalf("plain: %s %s", res.Status, b)
	}
	var bodies []string
	for _, s := range g.up.requests() {
		bodies = append(bodies, s.Body)
	}
	want := []string{`{"model":"m","stream":true,"messages":[],"stream_options":{"include_usage":true}}`,
		`{"stream":true,"stream_options":{"include_usage":true,"x":1}}`, plain}
	if diff := cmp.Diff(want, bodies); diff != "" {
		t.Errorf("bodies the provider received (-want +got):\n%s", diff)
	}
	for _, tc := range []struct{ body, says string }{
		{`{"stream":true,"stream_options":{"include_usage":false}}`, "stream_options.include_usage = false"},
		{`{"usage":{"include":false}}`, "usage.include = false"},
		{`{"stream":false,"stream":true}`, `the key "stream" appears twice`},
		{`not json`, "is not a JSON object"},
	} {
		res, b := review(tc.body)
		var r refusal
		_ = json.Unmarshal(b, &r)
		if res.StatusCode != http.StatusBadRequest || r.Error.Code != 400 || !strings.Contains(r.Error.Message, tc.says) {
			t.Errorf("%s: %s %s, want 400 saying %q", tc.body, res.Status, b, tc.says)
		}
	}
	if n := len(g.up.requests()); n != 3 {
		t.Errorf("the provider received %d requests, want the 3 admitted", n)
	}
}

// TestBrokerBoundsTheRequestBody: a body over MaxBrokeredBody is refused with a sentence, unsent.
func TestBrokerBoundsTheRequestBody(t *testing.T) {
	g := reserveRig(t, nil, 1000, nil)
	res, r := g.fixCall(t, `{"x":"`+strings.Repeat("a", MaxBrokeredBody)+`"}`)
	if res.StatusCode != http.StatusRequestEntityTooLarge || r.Type != "error" || !strings.Contains(r.Error.Message, "larger than the broker's bound of 32 MiB") {
		t.Errorf("an oversized body: %s %+v", res.Status, r)
	}
	if n := len(g.up.requests()); n != 0 {
		t.Errorf("the provider received %d requests", n)
	}
}

// TestBrokerForwardsOnlyItsPaths: only the node's methods and paths are forwarded; batches, files and anything
// else are refused in the API's shape with a sentence naming what would allow them; a node past a cap is refused
// a GET too.
func TestBrokerForwardsOnlyItsPaths(t *testing.T) {
	g := reserveRig(t, &BrokerBudget{MaxTokens: 100}, 50, nil)
	hdr := map[string]string{"x-api-key": phFixKey}
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{"POST", "/v1/messages/batches", 403},
		{"GET", "/v1/messages/batches/msgbatch_1/results", 403},
		{"POST", "/v1/files", 403},
		{"DELETE", "/v1/models", 403},
		{"GET", "/v1/models/claude-sonnet-4-5", 200},
		{"GET", "/v1/models/", 403},
		{"GET", "/v1/models/a%2Fb", 403},
		{"POST", "/v1/messages/count_tokens", 200},
	} {
		res, b := g.do(t, tc.method, g.url("fix", g.fixEP, tc.path), hdr, "")
		var r refusal
		_ = json.Unmarshal(b, &r)
		if res.StatusCode != tc.status {
			t.Errorf("%s %s: %s %s, want %d", tc.method, tc.path, res.Status, b, tc.status)
		}
		if tc.status == 403 && (r.Type != "error" || !strings.Contains(r.Error.Message, "it brokers only POST /v1/messages, POST /v1/messages/count_tokens, GET /v1/models, GET /v1/models/{id}") ||
			!strings.Contains(r.Error.Message, "bypass the node's budget") || !strings.Contains(r.Error.Message, `set credentials = "forward"`)) {
			t.Errorf("%s %s: refusal %s", tc.method, tc.path, b)
		}
	}
	res, b := g.do(t, "POST", g.url("review", g.revEP, "/api/v1/embeddings"), map[string]string{"Authorization": "Bearer " + phReview}, "{}")
	var r refusal
	if json.Unmarshal(b, &r) != nil || res.StatusCode != 403 || r.Error.Code != 403 || !strings.Contains(r.Error.Message, "POST /api/v1/chat/completions, GET /api/v1/models") {
		t.Errorf("review's embeddings: %s %s", res.Status, b)
	}
	// count_tokens is not a model call: it reserves nothing. Two model calls of 8 reserved 50+1 each... then
	// 16 + 51 <= 100, 24 + 51, 32 + 51, 40 + 51, 48 + 51 ... until the sums reach the cap; a cap reached refuses a GET.
	for i := 0; ; i++ {
		res, _ := g.fixCall(t, `{"max_tokens":50}`)
		if res.StatusCode != 200 {
			break
		}
		if i > 20 {
			t.Fatal("never refused")
		}
	}
	g.server.broker.nodes["fix"].meter.Load().add(BrokerUsage{InputTokens: 100})
	res, b = g.do(t, "GET", g.url("fix", g.fixEP, "/v1/models"), hdr, "")
	if json.Unmarshal(b, &r) != nil || res.StatusCode != http.StatusPaymentRequired || !strings.Contains(r.Error.Message, "refused this request because node fix reached its budget max_tokens = 100") {
		t.Errorf("a GET past the cap: %s %s, want 402", res.Status, b)
	}
	if got := len(g.up.requests()); got == 0 {
		t.Error("nothing was forwarded")
	}
	for _, s := range g.up.requests() {
		if strings.Contains(s.Path, "batches") || strings.Contains(s.Path, "files") {
			t.Errorf("the provider received %s %s", s.Method, s.Path)
		}
	}
}

// TestBrokerBoundsTheNodeAcrossAttempts: each attempt's sums start anew, but the node's across its attempts are
// bounded by each cap × the plan's attempts; an attempt past the plan's, or an earlier one, is refused, and the
// current one told again resets nothing.
func TestBrokerBoundsTheNodeAcrossAttempts(t *testing.T) {
	g := reserveRig(t, &BrokerBudget{MaxTokens: 30, Attempts: 2}, 20, nil)
	addr := strings.TrimPrefix(g.proxy.URL, "http://")
	call := func() int {
		res, _ := g.fixCall(t, `{"max_tokens":20}`)
		return res.StatusCode
	}
	// Attempt 1: reserve 25, settle 8; 8 + 25 = 33 > 30: refused.
	if got := []int{call(), call()}; got[0] != 200 || got[1] != 402 {
		t.Fatalf("attempt 1: %v", got)
	}
	ctx := context.Background()
	if err := StartAttemptAt(ctx, addr, ctlSecret, "fix", 2); err != nil {
		t.Fatal(err)
	}
	// Attempt 2 starts anew (the node holds 8 of its 60); told again that attempt 2 starts (a retried control
	// call), its sums go on: 8 + 25 > 30 is refused.
	first := call()
	if err := StartAttemptAt(ctx, addr, ctlSecret, "fix", 2); err != nil {
		t.Errorf("attempt 2 told twice: %v, want it accepted without a reset", err)
	}
	if got := []int{first, call()}; got[0] != 200 || got[1] != 402 {
		t.Fatalf("attempt 2: %v, want 200 then 402 (its sums not reset)", got)
	}
	if err := StartAttemptAt(ctx, addr, ctlSecret, "fix", 1); err == nil {
		t.Error("attempt 1 started again after attempt 2")
	}
	if err := StartAttemptAt(ctx, addr, ctlSecret, "fix", 3); err == nil {
		t.Error("attempt 3 of a node with 2 attempts started")
	}
	// The node-wide sum: with the node at 52 of 60 (a late answer of attempt 1, say), attempt 2 is refused even
	// though its own sums allow the call.
	g.server.broker.nodes["fix"].total.add(BrokerUsage{InputTokens: 36})
	g.server.broker.nodes["fix"].meter.Store(&nodeMeter{attempt: 2})
	res, r := g.fixCall(t, `{"max_tokens":20}`)
	if res.StatusCode != http.StatusPaymentRequired || !strings.Contains(r.Error.Message, "past its budget across its 2 attempts max_tokens = 60: the proxy metered 52 tokens") {
		t.Errorf("node-wide: %s %q", res.Status, r.Error.Message)
	}
}

// TestBrokerOversizedHeadersInTheAPIShape: a brokered request whose headers pass the bound is answered 431 in
// its API's JSON error shape, with the sentence, not Go's text.
func TestBrokerOversizedHeadersInTheAPIShape(t *testing.T) {
	nodes := []NodeConfig{
		{Name: "fix", Secret: secretFix, Broker: &BrokerConfig{API: BrokerAPIAnthropic, Paths: anthropicTestPaths, Endpoints: []string{"api.anthropic.com"},
			Credentials: []BrokerCredential{{Name: "ANTHROPIC_API_KEY", Placeholder: phFixKey, Value: realFixKey, Header: "x-api-key"}}}},
		{Name: "review", Secret: secretReview, Broker: &BrokerConfig{API: BrokerAPIOpenAI, Paths: openAITestPaths, Endpoints: []string{"openrouter.ai"},
			Credentials: []BrokerCredential{{Name: "OPENROUTER_API_KEY", Placeholder: phReview, Value: realReview, Header: "Authorization", Scheme: "Bearer"}}}},
	}
	addr, _ := startProxyWith(t, nodes, Options{Limits: Limits{MaxHeaderBytes: 4 << 10}})
	for _, tc := range []struct {
		node, target string
		openai       bool
	}{{"fix", brokerPrefix("fix", secretFix) + "api.anthropic.com/v1/messages", false},
		{"review", brokerPrefix("review", secretReview) + "openrouter.ai/api/v1/chat/completions", true},
		{"review, absolute form", "http://" + addr + brokerPrefix("review", secretReview) + "openrouter.ai/api/v1/chat/completions", true},
	} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", tc.target, strings.Repeat("a", 8<<10))
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		conn.Close()
		var r refusal
		if res.StatusCode != http.StatusRequestHeaderFieldsTooLarge || res.Header.Get("Content-Type") != "application/json" || json.Unmarshal(b, &r) != nil ||
			!strings.Contains(r.Error.Message, "larger than the proxy's bound of 4.0 KiB") || tc.openai != (r.Error.Code == 431) || tc.openai == (r.Type == "error") {
			t.Errorf("%s: %s %q %s, want 431 in its API's JSON shape", tc.node, res.Status, res.Header.Get("Content-Type"), b)
		}
	}
	// A request that is not a brokered one keeps the proxy's text refusal.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET http://example.com/ HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", 8<<10))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 431 || !strings.HasPrefix(string(b), "kewplan egress proxy: the request was refused unread") {
		t.Errorf("a forward-proxy request: %s %s", res.Status, b)
	}
}

// TestBrokerBindsThePlaceholderToTheNodesIdentity: a placeholder is usable only under its own node's proxy
// identity: another node's container that learned it, calling under the placeholder's node with its own
// identity, is refused, as is a base URL without an identity.
func TestBrokerBindsThePlaceholderToTheNodesIdentity(t *testing.T) {
	g := reserveRig(t, nil, 1000, nil)
	for _, tc := range []struct {
		name, target, reason string
	}{
		{"review's identity with fix's placeholder", g.proxy.URL + brokerPrefix("fix", secretReview)[:len(BrokerPathPrefix)] + "fix/" + BrokerIdentity("review", secretReview) + "/" + g.fixEP + "/v1/messages", ReasonOtherNodesIdentity},
		{"no identity", g.proxy.URL + BrokerPathPrefix + "fix/" + g.fixEP + "/v1/messages", ReasonNoIdentity},
		{"an identity made without the secret", g.proxy.URL + BrokerPathPrefix + "fix/" + BrokerIdentity("fix", "guess") + "/" + g.fixEP + "/v1/messages", ReasonNoIdentity},
	} {
		res, b := g.do(t, http.MethodPost, tc.target, map[string]string{"x-api-key": phFixKey}, `{"max_tokens":1}`)
		var r refusal
		if res.StatusCode != http.StatusForbidden || json.Unmarshal(b, &r) != nil || r.Type != "error" || !strings.Contains(r.Error.Message, "proxy identity") {
			t.Errorf("%s: %s %s, want 403 naming the proxy identity", tc.name, res.Status, b)
		}
	}
	if n := len(g.up.requests()); n != 0 {
		t.Errorf("the provider received %d requests", n)
	}
	if res, b := g.do(t, http.MethodPost, g.url("fix", g.fixEP, "/v1/messages"), map[string]string{"x-api-key": phFixKey}, `{"max_tokens":1}`); res.StatusCode != 200 {
		t.Errorf("fix under its own identity: %s %s", res.Status, b)
	}
	g.proxy.Close()
	var reasons []string
	for _, d := range brokerDecisions(t, g.log, KindBroker) {
		reasons = append(reasons, d.Reason)
	}
	if diff := cmp.Diff([]string{ReasonOtherNodesIdentity, ReasonNoIdentity, ReasonNoIdentity, ReasonBrokered}, reasons); diff != "" {
		t.Errorf("reasons (-want +got):\n%s", diff)
	}
}

// TestNoGoDefaultBodyOnAFailedExchange: an allowed plain-HTTP request, or a tunnel, whose host drops the
// connection unanswered is answered 502 with the proxy's sentence, not goproxy's text of the Go error.
func TestNoGoDefaultBodyOnAFailedExchange(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.(*net.TCPConn).SetLinger(0)
			c.Close() // no answer
		}
	}()
	target := fmt.Sprintf("drop.test:%d", l.Addr().(*net.TCPAddr).Port)
	addr, _ := startProxyWith(t, []NodeConfig{{Name: "fix", Secret: secretFix, Allow: []string{target}}},
		Options{AddressAllowed: func(netip.Addr) bool { return true }})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET http://%s/ HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: %s\r\n\r\n", target, target, basic("fix", secretFix))
	_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusBadGateway || !strings.Contains(string(b), "kewplan egress proxy: the proxy forwarded this request to "+target+", but the exchange with it failed") {
		t.Errorf("a dropped exchange: %s %q, want 502 with the proxy's sentence", res.Status, b)
	}
}
