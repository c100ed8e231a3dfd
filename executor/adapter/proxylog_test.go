package adapter

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kewplan/kewplan/executor/ledger"
)

// TestProxyLog: the proxy's decision lines become the ledger's brokered requests and denials, by node; control
// calls, the proxy's own messages and an oversized line are skipped, and a line split across writes or left
// without its newline is read whole.
func TestProxyLog(t *testing.T) {
	var denied []ledger.EgressDenial
	var brokered []ledger.BrokerRequest
	run := &Run{ID: "r1", EgressDenied: func(d ledger.EgressDenial) { denied = append(denied, d) },
		BrokerRequest: func(r ledger.BrokerRequest) { brokered = append(brokered, r) }}
	pl := NewProxyLog(run, map[string]string{"fix": "fix[0]"})
	mark, other := pl.Await("/control/nodes/fix/end"), pl.Await("/control/nodes/other/end")
	at := "2026-12-07T10:00:00Z"
	log := strings.Join([]string{
		`kewplan egress-proxy: listening on 0.0.0.0:3128`,
		`{"time":"` + at + `","node":"fix","method":"CONNECT","host":"evil.example","port":443,"allowed":false,"reason":"host not allowed"}`,
		`{"time":"` + at + `","kind":"control","node":"fix","method":"POST","path":"/control/nodes/fix/end","status":204,"allowed":true}`,
		`{"time":"` + at + `","kind":"broker","node":"fix","attempt":2,"method":"POST","host":"api.anthropic.com","path":"/v1/messages","status":200,"allowed":true,` +
			`"meter":{"model_call":true,"usage":{"model":"claude-sonnet-4-5","input_tokens":120,"output_tokens":25,"cost_source":"estimated","cost_usd":0.5}}}`,
		`{"node":"` + strings.Repeat("x", 70<<10) + `","allowed":false}`,
		`{"time":"` + at + `","kind":"broker","node":"fix","method":"GET","host":"api.anthropic.com","path":"/v1/models","status":403,"allowed":false,"reason":"node ended","refusal":"node \"fix\" ended"}`,
	}, "\n")
	half := len(log) / 2
	pl.Write([]byte(log[:half]))
	pl.Write([]byte(log[half:]))
	pl.Flush()
	select {
	case <-mark:
	default:
		t.Error("the control call on /control/nodes/fix/end was read, but its mark is still open")
	}
	select {
	case <-other:
		t.Error("a mark no line carried was closed")
	default:
	}

	tm, _ := time.Parse(time.RFC3339, at)
	cost := 0.5
	wantBroker := []ledger.BrokerRequest{
		{Node: "fix[0]", Attempt: 2, Method: "POST", Host: "api.anthropic.com", Path: "/v1/messages", Status: 200, ModelCall: true, Metered: true,
			Model: "claude-sonnet-4-5", CostSource: "estimated", InputTokens: 120, OutputTokens: 25, CostUSD: &cost, Time: tm},
		{Node: "fix[0]", Method: "GET", Host: "api.anthropic.com", Path: "/v1/models", Status: 403, Reason: `node ended: node "fix" ended`, Time: tm},
	}
	if diff := cmp.Diff(wantBroker, brokered); diff != "" {
		t.Errorf("brokered requests (-want +got):\n%s", diff)
	}
	wantDenied := []ledger.EgressDenial{
		{RunID: "r1", Node: "fix[0]", Method: "CONNECT", Host: "evil.example", Port: 443, Reason: "host not allowed", Time: tm},
		{RunID: "r1", Node: "fix[0]", Method: "GET", Host: "api.anthropic.com", Reason: "node ended", Refusal: `node "fix" ended`, Time: tm},
	}
	if diff := cmp.Diff(wantDenied, denied); diff != "" {
		t.Errorf("denials (-want +got):\n%s", diff)
	}
}
