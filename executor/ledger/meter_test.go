package ledger

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kewplan/kewplan/executor/statedir"
)

// TestMetersSideBySide: the proxy's figures summed from the brokered requests of each attempt, beside the
// agent's from its attempt row, and the finding when they differ.
func TestMetersSideBySide(t *testing.T) {
	l, err := Open(statedir.Dir{Root: t.TempDir()}.Ledger())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	if err := l.StartRun(RunRecord{ID: "r1", StartedAt: now}); err != nil {
		t.Fatal(err)
	}
	agentCost := 0.004
	if err := l.RecordAttempt(AttemptRecord{RunID: "r1", Node: "fix", Attempt: 1, Status: "budget_exceeded", InputTokens: 1000, OutputTokens: 200, CostUSD: &agentCost}); err != nil {
		t.Fatal(err)
	}
	c := 0.75
	firstByte := int64(420)
	for _, r := range []BrokerRequest{
		{Node: "fix", Attempt: 1, Status: 200, ModelCall: true, Metered: true, Model: "claude-sonnet-4-5", InputTokens: 24000, OutputTokens: 0, CostUSD: &c, CostSource: "estimated", FirstByteMS: &firstByte},
		{Node: "fix", Attempt: 1, Status: 200, ModelCall: true, Metered: true, Model: "claude-sonnet-4-5-20250929", InputTokens: 24000, CacheReadTokens: 7, CostUSD: &c, CostSource: "estimated"},
		{Node: "fix", Attempt: 1, Status: 402, ModelCall: true, BudgetCap: "max_usd", Reason: "budget exceeded"},
		{Node: "fix", Attempt: 1, Method: "GET", Status: 200},
	} {
		r.RunID, r.Time = "r1", now
		if err := l.RecordBrokerRequest(r); err != nil {
			t.Fatal(err)
		}
	}
	got, err := l.Meters("r1")
	if err != nil {
		t.Fatal(err)
	}
	total := 1.5
	want := []NodeMeters{{Node: "fix", Attempt: 1, Requests: 4, ModelCalls: 3, Refused: 1, Model: "claude-sonnet-4-5-20250929",
		Agent:   MeterSide{InputTokens: 1000, OutputTokens: 200, Tokens: 1200, CostUSD: &agentCost},
		Proxy:   MeterSide{InputTokens: 48000, CacheReadTokens: 7, Tokens: 48000, CostUSD: &total, CostSource: "estimated"},
		Finding: "the agent reported 1,200 tokens; the provider billed 48,000"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Meters() mismatch (-want +got):\n%s", diff)
	}
	reqs, err := l.BrokerRequests("r1")
	if err != nil || len(reqs) != 4 || !reqs[0].ModelCall || reqs[0].InputTokens != 24000 || *reqs[0].CostUSD != 0.75 || reqs[2].BudgetCap != "max_usd" ||
		reqs[0].FirstByteMS == nil || *reqs[0].FirstByteMS != 420 || reqs[1].FirstByteMS != nil {
		t.Errorf("BrokerRequests: %+v, %v", reqs, err)
	}
}

func TestMeterFinding(t *testing.T) {
	one, two := 1.0, 1.005
	for _, tc := range []struct {
		agent, proxy MeterSide
		want         string
	}{
		{MeterSide{Tokens: 1000}, MeterSide{Tokens: 1009}, ""},
		{MeterSide{Tokens: 100000}, MeterSide{Tokens: 100900}, ""},
		{MeterSide{Tokens: 100000}, MeterSide{Tokens: 102000}, "the agent reported 100,000 tokens; the provider billed 102,000"},
		{MeterSide{Tokens: 5, CostUSD: &one}, MeterSide{Tokens: 5, CostUSD: &two, CostSource: "reported"}, ""},
		{MeterSide{Tokens: 5, CostUSD: &two}, MeterSide{Tokens: 5, CostUSD: &one, CostSource: "unknown"}, ""},
	} {
		if got := MeterFinding(tc.agent, tc.proxy); got != tc.want {
			t.Errorf("MeterFinding(%+v, %+v) = %q, want %q", tc.agent, tc.proxy, got, tc.want)
		}
	}
}
