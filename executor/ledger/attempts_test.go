package ledger

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kewplan/kewplan/executor/statedir"
)

func TestAttemptsAndResumeColumns(t *testing.T) {
	l, err := Open(statedir.Dir{Root: t.TempDir()}.Ledger())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	start := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	if err := l.StartRun(RunRecord{ID: "r2", StartedAt: start, ResumedFrom: "r1"}); err != nil {
		t.Fatal(err)
	}
	exit, cost := int64(1), 0.5
	end := start.Add(time.Second)
	a1 := AttemptRecord{RunID: "r2", Node: "fix", Attempt: 1, Status: StatusFailed, ExitCode: &exit, StopClass: "api_error",
		StopReason: "api_error: HTTP 529 overloaded", RetryWait: 1500 * time.Millisecond, StartedAt: &start, EndedAt: &end,
		InputTokens: 1, OutputTokens: 2, CacheReadTokens: 3, CacheWriteTokens: 4, CostUSD: &cost, SessionID: "s",
		StdoutLog: "/o", StderrLog: "/e", BaseCommit: "b"}
	a2 := AttemptRecord{RunID: "r2", Node: "fix", Attempt: 2, Status: StatusSucceeded, StartedAt: &end, EndedAt: &end}
	for _, a := range []AttemptRecord{a1, a2} {
		if err := l.RecordAttempt(a); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.RecordAttempt(a1); err == nil {
		t.Error("RecordAttempt() replaced an attempt already recorded; attempts must never be overwritten")
	}
	if err := l.RecordNode(&NodeResult{RunID: "r2", Node: "fix", Status: StatusSucceeded, Started: start, Ended: end,
		Fingerprint: `{"v":1}`, Attempts: 2}); err != nil {
		t.Fatal(err)
	}
	if err := l.RecordNode(&NodeResult{RunID: "r2", Node: "impl", Status: StatusReused, Ended: end, ReusedFrom: "r1", Commit: "c"}); err != nil {
		t.Fatal(err)
	}
	got, err := l.Attempts("r2")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string][]AttemptRecord{"fix": {a1, a2}}, got); diff != "" {
		t.Errorf("Attempts() mismatch (-want +got):\n%s", diff)
	}
	run, nodes, err := l.Run("r2")
	if err != nil {
		t.Fatal(err)
	}
	if run.ResumedFrom != "r1" || run.Succeeded != 2 {
		t.Errorf("run resumed_from = %q, succeeded = %d; want r1 and 2 (a reused node counts)", run.ResumedFrom, run.Succeeded)
	}
	type hist struct {
		Node, Fingerprint, ReusedFrom string
		Attempts                      int
	}
	var h []hist
	for _, n := range nodes {
		h = append(h, hist{n.Node, n.Fingerprint, n.ReusedFrom, n.Attempts})
	}
	want := []hist{{"fix", `{"v":1}`, "", 2}, {"impl", "", "r1", 0}}
	if diff := cmp.Diff(want, h); diff != "" {
		t.Errorf("node history mismatch (-want +got):\n%s", diff)
	}
}
