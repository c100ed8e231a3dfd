package executor

import (
	"testing"

	"github.com/kewplan/kewplan/budget"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/runners"
)

// TestProxyCostFromTheProviderIsLabelledSo: a cost the proxy read from the provider's answers (OpenRouter's
// usage.cost) where the agent reported none is recorded as the provider's figure, never as the agent's.
func TestProxyCostFromTheProviderIsLabelledSo(t *testing.T) {
	meter, ok := runners.NewMeter("claude-code", "")
	if !ok {
		t.Fatal("no claude-code meter")
	}
	nb := &nodeBudget{kill: make(chan struct{}),
		tracker: budget.NewTracker(meter, budget.NodeConfig{Node: "fix", Protocol: "claude-code", Caps: budget.Caps{MaxUSD: 5}}, nil)}
	cost := 0.0123
	nb.brokered(ledger.BrokerRequest{ModelCall: true, Metered: true, InputTokens: 100, OutputTokens: 20, CostUSD: &cost, CostSource: "reported"})
	var res ledger.NodeResult
	nb.settle(&res, false)
	if res.CostSource != ledger.CostProvider || res.CostUSD == nil || *res.CostUSD != cost {
		t.Errorf("settled cost %v (%s), want %v from %s", res.CostUSD, res.CostSource, cost, ledger.CostProvider)
	}
}

// TestMeterFindingIsTheLedgers: an agent that prints its tokens but no cost, and a proxy that read the provider's
// own (different) cost: apply's finding is the one the ledger records for the attempt, from the same figures, so
// apply never says the meters differ where `runs show` says they agree.
func TestMeterFindingIsTheLedgers(t *testing.T) {
	meter, _ := runners.NewMeter("claude-code", "claude-sonnet-4-5")
	e, ok := runners.BuiltinPriceTable().Lookup("claude-sonnet-4-5")
	if !ok {
		t.Fatal("no built-in price for claude-sonnet-4-5")
	}
	nb := &nodeBudget{kill: make(chan struct{}), tracker: budget.NewTracker(meter, budget.NodeConfig{Node: "fix",
		Protocol: "claude-code", Price: &e.Price, Caps: budget.Caps{MaxUSD: 5}}, nil)}
	nb.tracker.Line([]byte(`{"type":"assistant","message":{"id":"m1","model":"claude-sonnet-4-5","content":[],"usage":{"input_tokens":1000,"output_tokens":200}}}`))
	cost := 0.5 // far from the estimate of 1,000 + 200 tokens
	nb.brokered(ledger.BrokerRequest{ModelCall: true, Metered: true, InputTokens: 1000, OutputTokens: 200, CostUSD: &cost, CostSource: "reported"})
	totals := meter.Totals()
	ledgerAgent := ledger.MeterSide{Tokens: totals.InputTokens + totals.OutputTokens + totals.CacheWriteTokens, CostUSD: totals.CostUSD}
	ledgerProxy := ledger.MeterSide{Tokens: 1200, CostUSD: &cost, CostSource: ledger.CostProvider}
	if got, want := nb.finding(), ledger.MeterFinding(ledgerAgent, ledgerProxy); got != want {
		t.Errorf("apply's finding %q, the ledger's %q", got, want)
	}
}
