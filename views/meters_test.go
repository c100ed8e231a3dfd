package views

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kewplan/kewplan/executor/ledger"
)

func TestMeterLines(t *testing.T) {
	cost := 1.2
	m := ledger.NodeMeters{Node: "fix", Attempt: 1, Requests: 4, ModelCalls: 3, Refused: 1, Model: "claude-sonnet-4-5\x1b[2J",
		Agent:   ledger.MeterSide{Tokens: 1200},
		Proxy:   ledger.MeterSide{Tokens: 48000, CostUSD: &cost, CostSource: ledger.CostEstimated},
		Finding: "the agent reported 1,200 tokens; the provider billed 48,000"}
	want := []string{
		`meters, attempt 1: agent 1,200 tokens, cost unknown · proxy 48,000 tokens in 3 model calls (1 refused at a cap), $1.20 estimated, model claude-sonnet-4-5\x1b[2J`,
		"finding: the agent reported 1,200 tokens; the provider billed 48,000",
	}
	if diff := cmp.Diff(want, meterLines(m)); diff != "" {
		t.Errorf("meterLines() mismatch (-want +got):\n%s", diff)
	}
}

func TestLogsHeaderShowsBothMeters(t *testing.T) {
	var out bytes.Buffer
	v := newLogsView(&out, false, logsOptions{})
	m := ledger.NodeMeters{Node: "fix", Attempt: 1, ModelCalls: 3, Refused: 1, Proxy: ledger.MeterSide{Tokens: 48000, CostSource: ledger.CostUnknown},
		Finding: "the agent reported 1,200 tokens; the provider billed 48,000", Agent: ledger.MeterSide{Tokens: 1200}}
	if err := v.Header(LogsHeader{Node: "fix", Runner: "claude-code", Status: "budget_exceeded", Reason: "max_tokens 10000 reached at 48000", Meters: []ledger.NodeMeters{m}}); err != nil {
		t.Fatal(err)
	}
	want := "── fix · claude-code · budget_exceeded\n  max_tokens 10000 reached at 48000\n" +
		"  meters, attempt 1: agent 1,200 tokens, cost unknown · proxy 48,000 tokens in 3 model calls (1 refused at a cap), cost unknown\n" +
		"  finding: the agent reported 1,200 tokens; the provider billed 48,000\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("header mismatch (-want +got):\n%s", diff)
	}
}

// TestMeterLinesSayUnsettled: calls that ended without the provider's final usage are named, and counted at
// their reservation, in runs show and logs.
func TestMeterLinesSayUnsettled(t *testing.T) {
	m := ledger.NodeMeters{Node: "fix", Attempt: 1, ModelCalls: 2, Unsettled: 1, Proxy: ledger.MeterSide{Tokens: 1508, CostSource: ledger.CostUnknown}}
	want := []string{"meters, attempt 1: agent 0 tokens, cost unknown · proxy 1,508 tokens in 2 model calls (1 unsettled: ended without the provider's final usage, counted at its reservation), cost unknown"}
	if diff := cmp.Diff(want, meterLines(m)); diff != "" {
		t.Errorf("meterLines() mismatch (-want +got):\n%s", diff)
	}
	var out bytes.Buffer
	v := &runsView{View: NewView(Streams{Stdout: &out}), vt: viewHuman}
	if err := v.Brokered([]ledger.BrokerRequest{{Node: "fix", Method: "POST", Path: "/broker/fix/x/api.anthropic.com/v1/messages", Status: 200,
		ModelCall: true, Metered: true, Unsettled: true, InputTokens: 8, OutputTokens: 1000}}); err != nil {
		t.Fatal(err)
	}
	if want := "  unsettled  fix POST /broker/fix/x/api.anthropic.com/v1/messages: ended without the provider's final usage; counted at its reservation, 1,008 tokens\n"; !bytes.Contains(out.Bytes(), []byte(want)) ||
		!bytes.Contains(out.Bytes(), []byte("0 refused, 1 unsettled;")) {
		t.Errorf("runs show's brokered requests:\n%s\nwant %q", out.String(), want)
	}
}
