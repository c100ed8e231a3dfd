package executor

import (
	"context"
	"strings"
	"testing"

	"github.com/kewplan/kewplan/executor/ledger"
)

// Budgets against the real engine. Each agent is the fake agent streaming claude-code turns with real usage
// figures; a node that must be killed sleeps for an hour after its turns under a timeout of minutes, so a budget
// that failed to kill it would end timed_out, never budget_exceeded: the tests assert on statuses and figures, not
// on the wall clock.

// TestBudgetNodeMaxUSDKillsTheContainer is the done-when: max_usd = 1.0 on claude-sonnet-4-5, two turns of
// 100,000 input and 20,000 output tokens (0.60 USD each), then a sleep: killed after the second turn,
// budget_exceeded with the cap and the figures, an estimated cost between 1.0 and 1.3, its dependent skipped, the
// warn_at crossing raised once, the apply failed (exit 1), and its log kept.
func TestBudgetNodeMaxUSDKillsTheContainer(t *testing.T) {
	f := newFixture(t)
	cfg := f.config(`
node "%[1]sfix" {
  runner  = "claude-code"
  model   = "claude-sonnet-4-5"
  repo    = %[2]q
  prompt  = "mode=turns\nturns=2\nusage=100000,20000\nsleep=1h"
  timeout = "5m"
  budget {
    max_usd = 1.0
    warn_at = 0.5
  }
}
node "%[1]sdocs" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  ref    = node.%[1]sfix.commit
  prompt = "mode=succeed"
}
`)
	var warnings []BudgetWarningEvent
	sum, _, err := f.apply(context.Background(), cfg, func(o *ApplyOptions) {
		o.Hooks = []Hook{&budgetRecorder{recorder: &recorder{}, warnings: &warnings}}
	})
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	fix := resultOf(t, sum, f.node("fix"))
	if fix.Status != ledger.StatusBudgetExceeded {
		t.Fatalf("fix: status %s (%s), want budget_exceeded", fix.Status, fix.Reason)
	}
	b := fix.Budget
	if b == nil || b.Scope != "node" || b.Cap != "max_usd" || b.Limit != 1.0 || b.Value < 1.0 || b.Value > 1.3 || b.Source != ledger.CostEstimated {
		t.Fatalf("fix: budget stop %+v", b)
	}
	if !strings.HasPrefix(fix.Reason, "max_usd 1.00 reached at 1.20") || !strings.Contains(fix.Reason, "killed its container") {
		t.Errorf("fix: reason %q", fix.Reason)
	}
	if fix.CostSource != ledger.CostEstimated || fix.CostUSD == nil || *fix.CostUSD < 1.0 || *fix.CostUSD > 1.3 {
		t.Errorf("fix: cost %v (%s), want an estimate between 1.0 and 1.3", fix.CostUSD, fix.CostSource)
	}
	if fix.Totals.InputTokens != 200000 || fix.Totals.OutputTokens != 40000 {
		t.Errorf("fix: partial telemetry %d in, %d out; want 200000 and 40000", fix.Totals.InputTokens, fix.Totals.OutputTokens)
	}
	if fix.BudgetWarning == "" || len(warnings) != 1 || warnings[0].Node != f.node("fix") || warnings[0].Cap != "max_usd" || warnings[0].WarnAt != 0.5 {
		t.Errorf("fix: warn_at crossings %+v (recorded %q)", warnings, fix.BudgetWarning)
	}
	if docs := resultOf(t, sum, f.node("docs")); docs.Status != ledger.StatusSkipped || !strings.Contains(docs.Reason, "exceeded its budget") {
		t.Errorf("docs: %s (%s), want skipped because fix exceeded its budget", docs.Status, docs.Reason)
	}
	if sum.Status != ledger.RunFailed || sum.CostSource != ledger.CostEstimated || len(sum.CostEstimated) != 1 {
		t.Errorf("summary: status %s, cost %v %s estimated %v", sum.Status, sum.CostUSD, sum.CostSource, sum.CostEstimated)
	}
	_, nodes := f.ledgerRun(sum.RunID)
	row := nodes[f.node("fix")]
	if row.Status != ledger.StatusBudgetExceeded || row.CostSource != ledger.CostEstimated || row.Budget == nil || row.Budget.Message != b.Message || row.StdoutLog == "" {
		t.Errorf("ledger row: %s %s %+v log %q", row.Status, row.CostSource, row.Budget, row.StdoutLog)
	}
}

// TestBudgetApplyWideStopsTheGraph: three nodes run, each spending 0.60 USD and then sleeping; the apply-wide
// max_usd of 1.50 is crossed by the third one's turn: all three are killed (budget_exceeded, the apply's cap), the
// node queued behind them and the dependent are skipped with the reason, and the apply fails.
func TestBudgetApplyWideStopsTheGraph(t *testing.T) {
	f := newFixture(t)
	spender := `
node "%[1]sNAME" {
  runner  = "claude-code"
  model   = "claude-sonnet-4-5"
  repo    = %[2]q
  prompt  = "mode=turns\nturns=1\nusage=100000,20000\nsleep=1h"
  timeout = "5m"
}
`
	nodes := "budget {\n  max_usd = 1.5\n}\n"
	for _, n := range []string{"a", "b", "c"} {
		nodes += strings.ReplaceAll(spender, "NAME", n)
	}
	nodes += `
node "%[1]slater" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  ref    = node.%[1]sa.commit
  prompt = "mode=succeed"
}
node "%[1]squeued" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  prompt = "mode=succeed"
}
`
	cfg := f.config(nodes)
	sum, rec, err := f.apply(context.Background(), cfg, func(o *ApplyOptions) { o.Parallelism = 3 })
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	for _, n := range []string{"a", "b", "c"} {
		r := resultOf(t, sum, f.node(n))
		if r.Status != ledger.StatusBudgetExceeded || r.Budget == nil || r.Budget.Scope != "apply" || r.Budget.Limit != 1.5 {
			t.Errorf("%s: %s (%s) budget %+v, want budget_exceeded by the apply's cap", n, r.Status, r.Reason, r.Budget)
		}
		if r.CostSource != ledger.CostEstimated || r.CostUSD == nil || *r.CostUSD < 0.59 || *r.CostUSD > 0.61 {
			t.Errorf("%s: cost %v (%s)", n, r.CostUSD, r.CostSource)
		}
	}
	for _, n := range []string{"later", "queued"} {
		r := resultOf(t, sum, f.node(n))
		if r.Status != ledger.StatusSkipped || !strings.Contains(r.Reason, "apply-wide max_usd 1.50 reached at 1.80") && !strings.Contains(r.Reason, "exceeded its budget") {
			t.Errorf("%s: %s (%s), want skipped for the apply-wide cap", n, r.Status, r.Reason)
		}
	}
	if q := resultOf(t, sum, f.node("queued")); !strings.Contains(q.Reason, "not started: apply-wide max_usd 1.50 reached at 1.80") {
		t.Errorf("queued: reason %q", q.Reason)
	}
	for _, e := range rec.events {
		if strings.HasPrefix(e, "start "+f.node("queued")) || strings.HasPrefix(e, "start "+f.node("later")) {
			t.Errorf("%s: a node started after the apply-wide cap was crossed", e)
		}
	}
	if sum.Status != ledger.RunFailed || sum.BudgetStop == nil || sum.BudgetStop.Scope != "apply" || sum.CostUSD == nil || *sum.CostUSD < 1.79 || *sum.CostUSD > 1.81 {
		t.Errorf("summary: %s stop %+v cost %v", sum.Status, sum.BudgetStop, sum.CostUSD)
	}
}

// TestBudgetStreams: how the cost is known from streams that report usage late, never, or repeatedly.
func TestBudgetStreams(t *testing.T) {
	f := newFixture(t)
	cfg := f.config(`
node "%[1]smute" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  prompt = "mode=turns\nturns=2\nusage=none\nfinal_usage=none\ntokens=none\ncost=none"
  budget {
    max_usd = 1.0
  }
}
node "%[1]slate" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  prompt = "mode=succeed\nfinal_usage=none\ntokens=300000,10000,0,0\ncost=none"
  budget {
    max_usd = 1.0
  }
}
node "%[1]srepeat" {
  runner  = "claude-code"
  model   = "claude-sonnet-4-5"
  repo    = %[2]q
  prompt  = "mode=turns\nturns=1\nblocks=3\nusage=100000,20000\ntokens=100000,20000,0,0\ncost=none"
  timeout = "5m"
  budget {
    max_usd = 1.0
  }
}
`)
	sum, _, err := f.apply(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)

	// A stream that never reports usage: the cost is unknown, never 0, and the total says so.
	mute := resultOf(t, sum, f.node("mute"))
	if mute.Status != ledger.StatusSucceeded || mute.CostSource != ledger.CostUnknown || mute.CostUSD != nil {
		t.Errorf("mute: %s (%s), cost %v (%s); want succeeded with an unknown cost", mute.Status, mute.Reason, mute.CostUSD, mute.CostSource)
	}
	if sum.CostSource != ledger.CostUnknown || len(sum.CostUnknown) != 1 || sum.CostUnknown[0] != f.node("mute") {
		t.Errorf("summary: cost source %s, unknown %v", sum.CostSource, sum.CostUnknown)
	}
	_, rows := f.ledgerRun(sum.RunID)
	if r := rows[f.node("mute")]; r.CostUSD != nil || r.CostSource != ledger.CostUnknown {
		t.Errorf("mute in the ledger: cost %v (%s), want NULL and unknown", r.CostUSD, r.CostSource)
	}

	// Usage only in the final event: the cap is still enforced on it (the agent had ended: nothing to kill).
	late := resultOf(t, sum, f.node("late"))
	if late.Status != ledger.StatusBudgetExceeded || late.Budget == nil || late.CostSource != ledger.CostEstimated ||
		late.CostUSD == nil || *late.CostUSD < 1.04 || *late.CostUSD > 1.06 {
		t.Errorf("late: %s (%s), cost %v (%s)", late.Status, late.Reason, late.CostUSD, late.CostSource)
	}

	// A message id repeated on three blocks is one response: 0.60 USD, not 1.80 over the 1.00 cap.
	rep := resultOf(t, sum, f.node("repeat"))
	if rep.Status != ledger.StatusSucceeded || rep.CostUSD == nil || *rep.CostUSD < 0.59 || *rep.CostUSD > 0.61 {
		t.Errorf("repeat: %s (%s), cost %v (%s); want succeeded at 0.60", rep.Status, rep.Reason, rep.CostUSD, rep.CostSource)
	}
}

// budgetRecorder is a recorder that also keeps the budget warnings.
type budgetRecorder struct {
	*recorder
	warnings *[]BudgetWarningEvent
}

func (b *budgetRecorder) BudgetWarning(e BudgetWarningEvent) {
	b.mu.Lock()
	defer b.mu.Unlock()
	*b.warnings = append(*b.warnings, e)
}
