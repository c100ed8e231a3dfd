package views

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/verdict"
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
	if err := WriteRunsHuman(&list, []ledger.RunRecord{run}); err != nil {
		t.Fatal(err)
	}
	if err := WriteRunsJSON(&listJSON, []ledger.RunRecord{run}); err != nil {
		t.Fatal(err)
	}
	if err := WriteRunHuman(&show, &run, nodes); err != nil {
		t.Fatal(err)
	}
	if err := WriteRunJSON(&showJSON, &run, nodes); err != nil {
		t.Fatal(err)
	}
	applyGolden(t, "runs_list.golden", list.Bytes())
	applyGolden(t, "runs_list_json.golden", listJSON.Bytes())
	applyGolden(t, "runs_show.golden", show.Bytes())
	applyGolden(t, "runs_show_json.golden", showJSON.Bytes())
	for _, out := range []string{show.String(), showJSON.String()} {
		if strings.ContainsAny(out, "\x1b\x07") {
			t.Error("an agent's control character reached runs show")
		}
	}
}

func TestRunsViewEmpty(t *testing.T) {
	var human, js bytes.Buffer
	WriteRunsHuman(&human, nil)
	WriteRunsJSON(&js, nil)
	if !strings.Contains(human.String(), "No runs recorded yet") || strings.TrimSpace(js.String()) != "{\n  \"runs\": []\n}" {
		t.Errorf("empty: %q %q", human.String(), js.String())
	}
}
