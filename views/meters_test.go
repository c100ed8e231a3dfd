package views

import (
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
		`meters, attempt 1: agent 1,200 tokens, cost unknown · proxy 48,000 tokens in 3 model calls (1 refused at a cap), $1.2000 estimated, model claude-sonnet-4-5\x1b[2J`,
		"finding: the agent reported 1,200 tokens; the provider billed 48,000",
	}
	if diff := cmp.Diff(want, meterLines(m)); diff != "" {
		t.Errorf("meterLines() mismatch (-want +got):\n%s", diff)
	}
}
