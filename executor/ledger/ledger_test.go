package ledger

import (
	"database/sql"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kewplan/kewplan/executor/statedir"
	"github.com/kewplan/kewplan/executor/verdict"
	"github.com/kewplan/kewplan/runners"
)

func TestLedgerRoundTrip(t *testing.T) {
	path := statedir.Dir{Root: t.TempDir()}.Ledger()
	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	if err := l.StartRun(RunRecord{ID: "r1", StartedAt: start, ConfigDigest: "sha256:abc", KewplanVersion: "v", PID: 42}); err != nil {
		t.Fatal(err)
	}
	cost, turns, exit := 0.125, int64(3), int64(0)
	in := &NodeResult{
		RunID: "r1", Node: "review", Runner: "claude-code", Protocol: "claude-code", Role: "reviewer", Image: "img", ImageID: "sha256:i",
		Model: "routed", Status: StatusApproved, ExitCode: &exit, Argv: []string{"docker", "run", "x"}, PromptSHA256: "p",
		StdoutLog: "/o", StderrLog: "/e", Started: start, Ended: start.Add(90 * time.Second), BaseCommit: "b", Commit: "b",
		Totals: runners.RunTotals{Model: "reported", ModelSource: "reported", SessionID: "s", InputTokens: 1, OutputTokens: 2,
			CacheReadTokens: 3, CacheWriteTokens: 4, CostUSD: &cost, Turns: &turns, Finished: true, Events: 5, UnparsedLines: 6, OversizedLines: 7},
		Verdict: &verdict.Verdict{Verdict: verdict.Approve, Summary: "ok", Findings: []verdict.Finding{{Path: "a.go", Line: 3, Message: "m"}}, SHA256: "v", Location: ".kew-review-verdict.json"},
	}
	if err := l.RecordNode(in); err != nil {
		t.Fatal(err)
	}
	if err := l.RecordNode(&NodeResult{RunID: "r1", Node: "after", Status: StatusSkipped, Reason: "dependency failed", Ended: start.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := l.FinishRun("r1", RunSucceeded, start.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	run, nodes, err := l.Run("r1")
	if err != nil {
		t.Fatal(err)
	}
	end := start.Add(2 * time.Minute)
	wantRun := &RunRecord{ID: "r1", StartedAt: start, EndedAt: &end, ConfigDigest: "sha256:abc", Status: RunSucceeded, KewplanVersion: "v",
		PID: 42, Process: Process{PID: 42}, Nodes: 2, Succeeded: 1, InputTokens: 1, OutputTokens: 2, CacheReadTokens: 3, CacheWriteTokens: 4, CostUSD: &cost,
		CostSource: CostReported, CostEstimated: []string{}, CostUnknown: []string{}}
	if diff := cmp.Diff(wantRun, run); diff != "" {
		t.Errorf("Run() mismatch (-want +got):\n%s", diff)
	}
	nodeEnd := start.Add(90 * time.Second)
	skippedEnd := start.Add(time.Minute)
	want := []NodeRecord{
		{RunID: "r1", Node: "review", Runner: "claude-code", Protocol: "claude-code", Role: "reviewer", Image: "img", ImageID: "sha256:i",
			RoutedModel: "routed", ReportedModel: "reported", ModelSource: "reported", SessionID: "s", InputTokens: 1, OutputTokens: 2,
			CacheReadTokens: 3, CacheWriteTokens: 4, CostUSD: &cost, Turns: &turns, Finished: true, Events: 5, UnparsedLines: 6,
			OversizedLines: 7, ExitCode: &exit, Status: StatusApproved, Argv: []string{"docker", "run", "x"}, PromptSHA256: "p",
			StdoutLog: "/o", StderrLog: "/e", StartedAt: &start, EndedAt: &nodeEnd, BaseCommit: "b", Commit: "b", Verdict: "approve",
			VerdictSummary: "ok", VerdictFindings: []verdict.Finding{{Path: "a.go", Line: 3, Message: "m"}}, SidecarSHA256: "v",
			SidecarLocation: ".kew-review-verdict.json", CostSource: CostReported, Attempts: 1},
		{RunID: "r1", Node: "after", Status: StatusSkipped, Reason: "dependency failed", Argv: []string{}, EndedAt: &skippedEnd},
	}
	if diff := cmp.Diff(want, nodes); diff != "" {
		t.Errorf("Run() nodes mismatch (-want +got):\n%s", diff)
	}
	// Unknown cost stays NULL, never 0.
	if err := l.StartRun(RunRecord{ID: "r2", StartedAt: start.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := l.RecordNode(&NodeResult{RunID: "r2", Node: "n", Status: StatusRunning, Started: start.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	runs, err := l.Runs()
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].ID != "r2" || runs[0].CostUSD != nil {
		t.Errorf("Runs(): %+v", runs)
	}
	// A crash left r2 running: the next command that holds the lock marks it interrupted, as of its last record.
	marked, live, err := l.MarkInterrupted(func(Process) bool { return false })
	if err != nil || len(marked) != 1 || marked[0].ID != "r2" || len(live) != 0 || !marked[0].Since.Equal(start.Add(time.Hour)) {
		t.Fatalf("MarkInterrupted() = %+v, %+v, %v", marked, live, err)
	}
	r2, n2, _ := l.Run("r2")
	if r2.Status != RunInterrupted || n2[0].Status != StatusInterrupted || !strings.Contains(n2[0].Reason, "ended without recording an outcome") ||
		r2.EndedAt == nil || !r2.EndedAt.Equal(start.Add(time.Hour)) {
		t.Errorf("after MarkInterrupted: run %s (ended %v), node %s (%s)", r2.Status, r2.EndedAt, n2[0].Status, n2[0].Reason)
	}
	if _, _, err := l.Run("nope"); err == nil || !strings.Contains(err.Error(), "no such run") {
		t.Errorf("Run(unknown) = %v", err)
	}
	l.Close()

	// Reopening migrates nothing twice; a newer schema is refused.
	l, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("PRAGMA user_version = 99"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(path); err == nil || !strings.Contains(err.Error(), "newer than this kewplan understands") {
		t.Errorf("Open(newer schema) = %v", err)
	}
}

// TestLedgerBudgetColumns: a budget_exceeded node keeps its cap and figures, an estimated cost says so, an unknown
// cost stays NULL (never 0), and the run's total names the nodes whose cost is estimated or unknown.
func TestLedgerBudgetColumns(t *testing.T) {
	l, err := Open(statedir.Dir{Root: t.TempDir()}.Ledger())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	start := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	if err := l.StartRun(RunRecord{ID: "b1", StartedAt: start}); err != nil {
		t.Fatal(err)
	}
	est, rep := 1.2, 0.25
	stop := &BudgetStop{Scope: "node", Cap: "max_usd", Limit: 1, Value: 1.2, Source: CostEstimated, Message: "max_usd 1.00 reached at 1.20"}
	for _, r := range []*NodeResult{
		{RunID: "b1", Node: "fix", Status: StatusBudgetExceeded, Started: start, CostUSD: &est, CostSource: CostEstimated, Budget: stop,
			BudgetWarning: "warn_at 0.5 of max_usd 1.00 crossed at 0.60"},
		{RunID: "b1", Node: "docs", Status: StatusSucceeded, Started: start, Totals: runners.RunTotals{CostUSD: &rep}},
		{RunID: "b1", Node: "mute", Status: StatusFailed, Started: start, CostSource: CostUnknown},
		{RunID: "b1", Node: "later", Status: StatusSkipped},
	} {
		if err := l.RecordNode(r); err != nil {
			t.Fatal(err)
		}
	}
	run, nodes, err := l.Run("b1")
	if err != nil {
		t.Fatal(err)
	}
	if run.CostUSD == nil || *run.CostUSD != 1.45 || run.CostSource != CostUnknown ||
		!cmp.Equal(run.CostEstimated, []string{"fix"}) || !cmp.Equal(run.CostUnknown, []string{"mute"}) {
		t.Errorf("run cost: %v %s estimated %v unknown %v", run.CostUSD, run.CostSource, run.CostEstimated, run.CostUnknown)
	}
	got := map[string]NodeRecord{}
	for _, n := range nodes {
		got[n.Node] = n
	}
	if n := got["fix"]; n.CostSource != CostEstimated || n.CostUSD == nil || *n.CostUSD != est || n.Status != StatusBudgetExceeded ||
		!cmp.Equal(n.Budget, stop) || n.BudgetWarning == "" {
		t.Errorf("fix: %+v budget %+v", n, n.Budget)
	}
	if n := got["docs"]; n.CostSource != CostReported || n.CostUSD == nil || *n.CostUSD != rep || n.Budget != nil {
		t.Errorf("docs: source %q cost %v budget %v", n.CostSource, n.CostUSD, n.Budget)
	}
	if n := got["mute"]; n.CostSource != CostUnknown || n.CostUSD != nil {
		t.Errorf("mute: an unknown cost must stay unknown, got source %q cost %v", n.CostSource, n.CostUSD)
	}
	if n := got["later"]; n.CostSource != "" || n.CostUSD != nil {
		t.Errorf("later (never ran): source %q cost %v", n.CostSource, n.CostUSD)
	}
}

func TestStateLockIsExclusive(t *testing.T) {
	dir := t.TempDir()
	a, err := LockStateDir(statedir.Dir{Root: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LockStateDir(statedir.Dir{Root: dir}); err == nil || !strings.Contains(err.Error(), "another kewplan apply") {
		t.Fatalf("second lock: %v", err)
	}
	if err := a.Unlock(); err != nil {
		t.Fatal(err)
	}
	b, err := LockStateDir(statedir.Dir{Root: dir})
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	b.Unlock()
}

// TestMarkInterrupted: a run left running is marked interrupted only when its recorded process is gone; each of
// its nodes that had not ended is marked with the last thing recorded of it (its attempts, its log's last write),
// the run with the latest of them; nodes that had ended keep their outcome.
func TestMarkInterrupted(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(statedir.Dir{Root: dir}.Ledger())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	start := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	me := CurrentProcess()
	dead := Process{Host: me.Host, BootID: me.BootID, PID: me.PID, Start: me.Start + 1} // a reused pid
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(l.StartRun(RunRecord{ID: "alive", StartedAt: start, Process: me}))
	must(l.StartRun(RunRecord{ID: "dead", StartedAt: start, Process: dead}))
	log := dir + "/work.stdout.log"
	must(os.WriteFile(log, []byte("{}\n"), 0o600))
	logTime := start.Add(30 * time.Minute)
	must(os.Chtimes(log, logTime, logTime))
	must(l.RecordNode(&NodeResult{RunID: "dead", Node: "work", Status: StatusRunning, Started: start.Add(time.Minute), StdoutLog: log,
		Repo: "/src/repo", Slug: "work", BaseCommit: "base", Attempts: 2}))
	must(l.RecordAttempt(AttemptRecord{RunID: "dead", Node: "work", Attempt: 1, Status: StatusFailed, StartedAt: ptr(start.Add(time.Minute)), EndedAt: ptr(start.Add(10 * time.Minute))}))
	must(l.RecordNode(&NodeResult{RunID: "dead", Node: "done", Status: StatusSucceeded, Started: start, Ended: start.Add(5 * time.Minute)}))
	must(l.RecordNode(&NodeResult{RunID: "dead", Node: "waiting", Status: StatusRunning, Started: start.Add(2 * time.Minute)}))

	marked, live, err := l.MarkInterrupted(Process.Alive)
	must(err)
	if len(live) != 1 || live[0].ID != "alive" {
		t.Errorf("live = %+v, want the run of this very process", live)
	}
	want := []InterruptedRun{{ID: "dead", Process: dead, Since: logTime, Nodes: []string{"waiting", "work"}}}
	if diff := cmp.Diff(want, marked); diff != "" {
		t.Fatalf("MarkInterrupted() mismatch (-want +got):\n%s", diff)
	}
	run, nodes, err := l.Run("dead")
	must(err)
	if run.Status != RunInterrupted || run.EndedAt == nil || !run.EndedAt.Equal(logTime) || run.Host != me.Host {
		t.Errorf("run: %s ended %v host %q", run.Status, run.EndedAt, run.Host)
	}
	got := map[string]NodeRecord{}
	for _, n := range nodes {
		got[n.Node] = n
	}
	for name, wantEnd := range map[string]time.Time{"work": logTime, "waiting": start.Add(2 * time.Minute)} {
		n := got[name]
		if n.Status != StatusInterrupted || n.EndedAt == nil || !n.EndedAt.Equal(wantEnd) ||
			!strings.Contains(n.Reason, fmt.Sprintf("kewplan pid %d on %s", dead.PID, dead.Host)) || !strings.Contains(n.Reason, wantEnd.Format(time.RFC3339)) {
			t.Errorf("%s: %s ended %v (%s), want interrupted at %v", name, n.Status, n.EndedAt, n.Reason, wantEnd)
		}
	}
	if n := got["work"]; n.Repo != "/src/repo" || n.Slug != "work" || n.BaseCommit != "base" {
		t.Errorf("work: repo %q slug %q base %q, want what keeping its work needs", n.Repo, n.Slug, n.BaseCommit)
	}
	if got["done"].Status != StatusSucceeded {
		t.Errorf("done: %s, want its recorded outcome kept", got["done"].Status)
	}
	if again, _, err := l.MarkInterrupted(Process.Alive); err != nil || len(again) != 0 {
		t.Errorf("a second MarkInterrupted() = %+v, %v, want nothing", again, err)
	}
}

func ptr[T any](v T) *T { return &v }

// TestProcessAlive: this process is alive; the same pid with another start time, another boot or another host is
// not, and neither is an identity recorded without a start time.
func TestProcessAlive(t *testing.T) {
	me := CurrentProcess()
	if me.Start == 0 || me.BootID == "" {
		t.Skip("no /proc start time or boot id on this system")
	}
	for _, c := range []struct {
		name string
		p    Process
		want bool
	}{
		{"this process", me, true},
		{"a reused pid", Process{Host: me.Host, BootID: me.BootID, PID: me.PID, Start: me.Start + 1}, false},
		{"before a reboot", Process{Host: me.Host, BootID: "another-boot", PID: me.PID, Start: me.Start}, false},
		{"another host", Process{Host: me.Host + "-other", BootID: me.BootID, PID: me.PID, Start: me.Start}, false},
		{"only a pid", Process{PID: me.PID}, false},
	} {
		if got := c.p.Alive(); got != c.want {
			t.Errorf("%s: Alive() = %v, want %v", c.name, got, c.want)
		}
	}
}
