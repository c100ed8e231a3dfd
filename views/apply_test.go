package views

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kewplan/kewplan/executor"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/internal/testtools/golden"
	"github.com/kewplan/kewplan/runners"
)

var applyT0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

// applyEvents replays a small run: fix succeeds, review (agent-hostile output in its reason) fails, docs is
// skipped.
func applyEvents(v executor.Hook) {
	cost := 0.0421
	exit0, exit1 := int64(0), int64(1)
	v.ApplyStart(executor.ApplyStartEvent{RunID: "20261130T100000Z-abc123", StateDir: "/s", ConfigDigest: "sha256:d", Nodes: []string{"fix", "review", "docs", "spend"}, Parallelism: 4, Time: applyT0})
	v.NodeStart(executor.NodeStartEvent{RunID: "20261130T100000Z-abc123", Node: "fix", Runner: "claude-code", Image: "img", Model: "claude-sonnet-4-5", Time: applyT0})
	v.Warning(executor.WarningEvent{RunID: "20261130T100000Z-abc123", Message: "the allowlist network \"kew-allowlist\" is not --internal", Time: applyT0})
	v.NodeProgress(executor.NodeProgressEvent{RunID: "20261130T100000Z-abc123", Node: "fix", Elapsed: 2 * time.Second, Time: applyT0.Add(2 * time.Second),
		Totals: runners.RunTotals{SessionID: "s1", InputTokens: 1200, OutputTokens: 1, Events: 2}})
	fix := ledger.NodeResult{RunID: "20261130T100000Z-abc123", Node: "fix", Runner: "claude-code", Role: "worker", Image: "img", Model: "claude-sonnet-4-5",
		Status: ledger.StatusSucceeded, ExitCode: &exit0, Started: applyT0, Ended: applyT0.Add(75 * time.Second), Commit: "c0ffee", Branch: "kew/fix", Pushed: true,
		Totals: runners.RunTotals{Model: "claude-sonnet-4-5", SessionID: "s1", InputTokens: 12345, OutputTokens: 678, CacheReadTokens: 9000, CostUSD: &cost, Events: 9}}
	v.NodeDone(fix)
	v.NodeStart(executor.NodeStartEvent{RunID: "20261130T100000Z-abc123", Node: "review", Runner: "opencode", Model: "m\x1b]52;c;ZXZpbA==\x07", Time: applyT0.Add(75 * time.Second)})
	review := ledger.NodeResult{RunID: "20261130T100000Z-abc123", Node: "review", Runner: "opencode", Role: "reviewer", Status: ledger.StatusFailed,
		Reason: "the agent exited with status 1: \x1b[2Jboom\r\nsecond line", ExitCode: &exit1, Started: applyT0.Add(75 * time.Second), Ended: applyT0.Add(80 * time.Second),
		Totals: runners.RunTotals{InputTokens: 10, OutputTokens: 5, UnparsedLines: 3}}
	v.NodeDone(review)
	docs := ledger.NodeResult{RunID: "20261130T100000Z-abc123", Node: "docs", Runner: "claude-code", Status: ledger.StatusSkipped, Reason: `dependency "review" failed`, Ended: applyT0.Add(80 * time.Second)}
	v.NodeDone(docs)
	// spend crosses warn_at, then its max_usd, on estimated costs.
	half, over, total, maxUSD, exit137 := 0.6, 1.2, 1.2421, 5.0, int64(137)
	v.NodeStart(executor.NodeStartEvent{RunID: "20261130T100000Z-abc123", Node: "spend", Runner: "claude-code", Model: "claude-sonnet-4-5", Time: applyT0.Add(80 * time.Second)})
	v.NodeProgress(executor.NodeProgressEvent{RunID: "20261130T100000Z-abc123", Node: "spend", Elapsed: time.Second, Time: applyT0.Add(81 * time.Second),
		Totals: runners.RunTotals{InputTokens: 100000, OutputTokens: 20000, Events: 2}, CostUSD: &half, CostSource: ledger.CostEstimated})
	v.BudgetWarning(executor.BudgetWarningEvent{RunID: "20261130T100000Z-abc123", Node: "spend", Scope: "node", Cap: "max_usd", Limit: 1, Value: 0.6,
		WarnAt: 0.5, Source: ledger.CostEstimated, Message: "warn_at 0.5 of max_usd 1.00 crossed at 0.60", Time: applyT0.Add(81 * time.Second)})
	spend := ledger.NodeResult{RunID: "20261130T100000Z-abc123", Node: "spend", Runner: "claude-code", Role: "worker", Model: "claude-sonnet-4-5",
		Status: ledger.StatusBudgetExceeded, Reason: "max_usd 1.00 reached at 1.20 (estimated: tokens × price); kewplan killed its container", ExitCode: &exit137,
		Started: applyT0.Add(80 * time.Second), Ended: applyT0.Add(82 * time.Second), Totals: runners.RunTotals{InputTokens: 200000, OutputTokens: 40000, Events: 4},
		CostUSD: &over, CostSource: ledger.CostEstimated, BudgetWarning: "warn_at 0.5 of max_usd 1.00 crossed at 0.60",
		Budget: &ledger.BudgetStop{Scope: "node", Cap: "max_usd", Limit: 1, Value: 1.2, Source: ledger.CostEstimated, Message: "max_usd 1.00 reached at 1.20"}}
	v.NodeDone(spend)
	v.ApplyDone(executor.ApplySummary{RunID: "20261130T100000Z-abc123", Status: ledger.RunFailed, Nodes: []ledger.NodeResult{fix, review, docs, spend},
		Started: applyT0, Ended: applyT0.Add(82 * time.Second), InputTokens: 212355, OutputTokens: 40683, CacheReadTokens: 9000, CostUSD: &total,
		CostSource: ledger.CostEstimated, CostEstimated: []string{"spend"}, CostUnknown: []string{}, MaxUSD: &maxUSD})
}

func TestApplyViewGoldens(t *testing.T) {
	for _, tc := range []struct {
		name  string
		live  bool // the display, live on a terminal
		json  bool // the NDJSON stream
		color bool
	}{
		{"apply_plain", false, false, false},
		{"apply_json", false, true, false},
		{"apply_live", true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			var h executor.Hook = newApplyStream(&buf)
			if !tc.json {
				d := newApplyDisplay(&buf, tc.live, tc.color)
				d.refresh = 0
				d.now = func() time.Time { return applyT0.Add(3 * time.Second) }
				h = d
			}
			applyEvents(h)
			golden.Check(t, filepath.Join("testdata", tc.name+".golden"), buf.Bytes())
			out := buf.String()
			if !tc.live && strings.Contains(out, "\x1b") {
				t.Error("an escape sequence reached the output")
			}
			if tc.live && (strings.Contains(out, "\x1b[2J") || strings.Contains(out, "\x1b]52")) {
				t.Error("the agent's escape sequence reached the terminal")
			}
			if strings.Contains(out, "\x07") || strings.Contains(out, "\r") {
				t.Error("a control character reached the output")
			}
		})
	}
}

func TestFormatters(t *testing.T) {
	c := 1.23456
	got := []string{formatCost(nil), formatCost(&c),
		formatDuration(0), formatDuration(850 * time.Millisecond), formatDuration(12300 * time.Millisecond), formatDuration(245 * time.Second), formatDuration(62 * time.Minute)}
	want := []string{"-", "$1.235", "-", "850ms", "12.3s", "4m05s", "1h02m"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("formatters (-want +got):\n%s", diff)
	}
}

// TestApplyDisplayBudgetStop: when the apply-wide max_usd stopped the apply, the summary says so and what kewplan
// did; a total with an unknown cost is a lower bound that names the node.
func TestApplyDisplayBudgetStop(t *testing.T) {
	var buf bytes.Buffer
	d := newApplyDisplay(&buf, false, false)
	total := 2.1
	d.ApplyDone(executor.ApplySummary{RunID: "r", Status: ledger.RunFailed, Started: applyT0, Ended: applyT0.Add(time.Minute), CostUSD: &total,
		CostSource: ledger.CostUnknown, CostEstimated: []string{"a", "b"}, CostUnknown: []string{"c"},
		BudgetStop: &ledger.BudgetStop{Scope: "apply", Cap: "max_usd", Limit: 2, Value: 2.1, Source: "estimated", Message: "apply-wide max_usd 2.00 reached at 2.10"}})
	for _, want := range []string{"cost at least $2.10 (unknown for c; estimated for a, b).",
		"Budget exceeded: apply-wide max_usd 2.00 reached at 2.10: kewplan started nothing new, killed the nodes still running and skipped the rest."} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, buf.String())
		}
	}
}
