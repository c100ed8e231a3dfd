package views

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/verdict"
	"github.com/kewplan/kewplan/internal/testtools/golden"
)

func runsFixture() (ledger.RunRecord, []ledger.NodeRecord) {
	start := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	end := start.Add(80 * time.Second)
	fixEnd := start.Add(75 * time.Second)
	cost := 0.0421
	exit0 := int64(0)
	run := ledger.RunRecord{ID: "20261130T100000Z-abc123", StartedAt: start, EndedAt: &end, ConfigDigest: "sha256:d", Status: "failed",
		KewplanVersion: "0.1.0", PID: 7, Nodes: 2, Succeeded: 1, InputTokens: 12345, OutputTokens: 678, CacheReadTokens: 9000, CostUSD: &cost}
	nodes := []ledger.NodeRecord{
		{RunID: run.ID, Node: "review", Runner: "claude-code", Protocol: "claude-code", Role: "reviewer", Image: "img", ImageID: "sha256:i",
			RoutedModel: "claude-sonnet-4-5", ReportedModel: "claude-sonnet-4-5\x1b[2J", SessionID: "s1", InputTokens: 12345, OutputTokens: 678,
			CacheReadTokens: 9000, CostUSD: &cost, Events: 9, ExitCode: &exit0, Status: "approved", StartedAt: &start, EndedAt: &fixEnd,
			Argv: []string{"docker", "run", "--rm", "--name", "kew-review", "img", "--model", "claude-sonnet-4-5"}, PromptSHA256: "p",
			StdoutLog: "/s/logs/r/review.stdout.log", StderrLog: "/s/logs/r/review.stderr.log", BaseCommit: "b0", Commit: "b0",
			Verdict: "approve", VerdictSummary: "Looks good\x07", VerdictFindings: []verdict.Finding{{Path: "a.go", Line: 3, Message: "nit: \x1b]52;c;x\x07name"}},
			SidecarSHA256: "v", SidecarLocation: ".kew-review-verdict.json"},
		{RunID: run.ID, Node: "docs", Status: "skipped", Reason: `dependency "fix" failed`, EndedAt: &end},
	}
	return run, nodes
}

func TestRunsViewGoldens(t *testing.T) {
	run, nodes := runsFixture()
	var list, listJSON, show, showJSON bytes.Buffer
	if err := writeRunsHuman(&list, []ledger.RunRecord{run}); err != nil {
		t.Fatal(err)
	}
	if err := writeRunsJSON(&listJSON, []ledger.RunRecord{run}); err != nil {
		t.Fatal(err)
	}
	if err := writeRunHuman(&show, &run, nodes); err != nil {
		t.Fatal(err)
	}
	if err := writeRunJSON(&showJSON, &run, nodes); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "runs_list.golden"), list.Bytes())
	golden.Check(t, filepath.Join("testdata", "runs_list_json.golden"), listJSON.Bytes())
	golden.Check(t, filepath.Join("testdata", "runs_show.golden"), show.Bytes())
	golden.Check(t, filepath.Join("testdata", "runs_show_json.golden"), showJSON.Bytes())
	for _, out := range []string{show.String(), showJSON.String()} {
		if strings.ContainsAny(out, "\x1b\x07") {
			t.Error("an agent's control character reached runs show")
		}
	}
}

func TestRunsViewEmpty(t *testing.T) {
	var human, js bytes.Buffer
	writeRunsHuman(&human, nil)
	writeRunsJSON(&js, nil)
	if !strings.Contains(human.String(), "No runs recorded yet") || strings.TrimSpace(js.String()) != "{\n  \"runs\": []\n}" {
		t.Errorf("empty: %q %q", human.String(), js.String())
	}
}

// TestRunsShowHistory: a node retried on API errors lists its attempts, and a reused node names the run it came
// from, in the human and JSON views.
func TestRunsShowHistory(t *testing.T) {
	run, _ := runsFixture()
	start := run.StartedAt
	at := func(s int) *time.Time { x := start.Add(time.Duration(s) * time.Second); return &x }
	exit1, exit0 := int64(1), int64(0)
	c1, c3 := 0.0, 0.0123
	nodes := []ledger.NodeRecord{
		{RunID: run.ID, Node: "implement", Status: "reused", Commit: "c0ffee", Branch: "kew/implement"},
		{RunID: run.ID, Node: "fix", Runner: "claude-code", Status: "failed", Reason: "api_error: HTTP 529 overloaded after 3 attempts",
			ExitCode: &exit1, StartedAt: at(0), EndedAt: at(50), InputTokens: 300, CostUSD: &c3},
		{RunID: run.ID, Node: "docs", Runner: "pi", Status: "succeeded", ExitCode: &exit0, StartedAt: at(1), EndedAt: at(9), InputTokens: 5},
	}
	hist := map[string]NodeHistory{
		"implement": {ReusedFrom: "20261129T090000Z-0ld000"},
		"fix": {Attempts: []AttemptJSON{
			{Attempt: 1, Status: "failed", ExitCode: &exit1, StopReason: "api_error: HTTP 529 overloaded", RetryWait: "1.1s", StartedAt: at(0), EndedAt: at(2), CostUSD: &c1},
			{Attempt: 2, Status: "failed", ExitCode: &exit1, StopReason: "api_error: HTTP 529 overloaded\x1b[2J", RetryWait: "1.9s", StartedAt: at(4), EndedAt: at(6), InputTokens: 100},
			{Attempt: 3, Status: "failed", ExitCode: &exit1, StopReason: "api_error: HTTP 529 overloaded", StartedAt: at(10), EndedAt: at(50), InputTokens: 200, CostUSD: &c3},
		}},
	}
	var human, js bytes.Buffer
	if err := writeRunHistoryHuman(&human, &run, nodes, hist); err != nil {
		t.Fatal(err)
	}
	if err := writeRunHistoryJSON(&js, &run, nodes, hist); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "runs_show_history.golden"), human.Bytes())
	golden.Check(t, filepath.Join("testdata", "runs_show_history_json.golden"), js.Bytes())
	for _, out := range []string{human.String(), js.String()} {
		if strings.ContainsAny(out, "\x1b") {
			t.Error("an agent's control character reached runs show")
		}
	}
}

// TestRunsShowBudget: a node stopped by its cap shows the cap, the figures and the warning; each cost says where it
// came from, and the run's total says it includes an estimate.
func TestRunsShowBudget(t *testing.T) {
	start := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	end := start.Add(80 * time.Second)
	cost, spent, total := 0.0421, 1.2, 1.2421
	exit0, exit137 := int64(0), int64(137)
	run := ledger.RunRecord{ID: "20261130T100000Z-b0d9e7", StartedAt: start, EndedAt: &end, Status: "failed", Nodes: 4, Succeeded: 1,
		InputTokens: 200010, OutputTokens: 40005, CostUSD: &total, CostSource: "unknown", CostEstimated: []string{"fix"}, CostUnknown: []string{"mute"}}
	nodes := []ledger.NodeRecord{
		{RunID: run.ID, Node: "lint", Runner: "opencode", Status: "succeeded", ExitCode: &exit0, StartedAt: &start, EndedAt: &end,
			InputTokens: 10, OutputTokens: 5, CostUSD: &cost, CostSource: "reported"},
		{RunID: run.ID, Node: "fix", Runner: "claude-code", Role: "worker", RoutedModel: "claude-sonnet-4-5",
			InputTokens: 200000, OutputTokens: 40000, CostUSD: &spent, CostSource: "estimated", Events: 4, ExitCode: &exit137,
			Status: "budget_exceeded", Reason: "max_usd 1.00 reached at 1.20 (estimated: tokens × price); kewplan killed its container",
			StartedAt: &start, EndedAt: &end, Budget: &ledger.BudgetStop{Scope: "node", Cap: "max_usd", Limit: 1, Value: 1.2, Source: "estimated",
				Message: "max_usd 1.00 reached at 1.20"}, BudgetWarning: "warn_at 0.5 of max_usd 1.00 crossed at 0.60"},
		{RunID: run.ID, Node: "mute", Runner: "claude-code", Status: "failed", Reason: "the agent exited with status 1", ExitCode: &exit0,
			StartedAt: &start, EndedAt: &end, CostSource: "unknown"},
		{RunID: run.ID, Node: "docs", Status: "skipped", Reason: `dependency "fix" exceeded its budget`, EndedAt: &end},
	}
	var list, show, showJSON bytes.Buffer
	if err := writeRunsHuman(&list, []ledger.RunRecord{run}); err != nil {
		t.Fatal(err)
	}
	if err := writeRunHuman(&show, &run, nodes); err != nil {
		t.Fatal(err)
	}
	if err := writeRunJSON(&showJSON, &run, nodes); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "runs_list_budget.golden"), list.Bytes())
	golden.Check(t, filepath.Join("testdata", "runs_show_budget.golden"), show.Bytes())
	golden.Check(t, filepath.Join("testdata", "runs_show_budget_json.golden"), showJSON.Bytes())
	for _, want := range []string{"at least $1.242 (unknown for mute; estimated for fix)", "budget         max_usd 1.00 reached at 1.20 (the node's own cap)",
		"$1.20 (estimated: tokens × price)", "unknown (no usage reported"} {
		if !strings.Contains(show.String(), want) {
			t.Errorf("runs show lacks %q:\n%s", want, show.String())
		}
	}
}
