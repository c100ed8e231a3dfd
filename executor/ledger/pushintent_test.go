package ledger

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kewplan/kewplan/executor/statedir"
)

// TestPushIntent: an intent recorded before a push is resolved by the node's recorded outcome; one left open by
// an apply that died is found once its run is interrupted, and resolving it as landed records the node as pushed
// (its fingerprint and attempts kept), as not landed leaves it interrupted; either closes it for good.
func TestPushIntent(t *testing.T) {
	l, err := Open(statedir.Dir{Root: t.TempDir()}.Ledger())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	if err := l.StartRun(RunRecord{ID: "r1", StartedAt: start, PID: 1 << 30}); err != nil {
		t.Fatal(err)
	}
	const c1, c2, c3 = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222", "3333333333333333333333333333333333333333"
	for _, node := range []string{"done", "landed", "elsewhere"} {
		if err := l.RecordNode(&NodeResult{RunID: "r1", Node: node, Role: "worker", Status: StatusRunning, Started: start,
			Attempts: 1, Fingerprint: `{"node":"` + node + `"}`, BaseCommit: c3}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []PushIntent{
		{RunID: "r1", Node: "done", Attempt: 1, Repo: "/origin.git", Branch: "kew/done", Commit: c1, RecordedAt: start.Add(time.Second)},
		{RunID: "r1", Node: "landed", Attempt: 1, Repo: "/origin.git", Branch: "kew/landed", Commit: c1, RecordedAt: start.Add(2 * time.Second)},
		{RunID: "r1", Node: "elsewhere", Attempt: 1, Repo: "/origin.git", Branch: "kew/elsewhere", Commit: c2, RecordedAt: start.Add(3 * time.Second)},
	} {
		if err := l.RecordPushIntent(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.RecordPushIntent(PushIntent{RunID: "r1", Node: "done", Attempt: 1}); err == nil {
		t.Error("RecordPushIntent() of an intent without remote, branch or commit succeeded, want an error")
	}
	if open, err := l.UnresolvedPushIntents(); err != nil || len(open) != 0 {
		t.Errorf("UnresolvedPushIntents() of a running run = %+v, %v; want none (its apply may be alive)", open, err)
	}
	// The node's outcome resolves its intent, in the transaction that records it.
	if err := l.RecordNode(&NodeResult{RunID: "r1", Node: "done", Role: "worker", Status: StatusSucceeded, Started: start,
		Ended: start.Add(time.Minute), Attempts: 1, Commit: c1, Branch: "kew/done", Pushed: true}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.MarkInterrupted(func(Process) bool { return false }); err != nil {
		t.Fatal(err)
	}
	open, err := l.UnresolvedPushIntents()
	if err != nil {
		t.Fatal(err)
	}
	want := []PushIntent{
		{RunID: "r1", Node: "landed", Attempt: 1, Repo: "/origin.git", Branch: "kew/landed", Commit: c1, RecordedAt: start.Add(2 * time.Second)},
		{RunID: "r1", Node: "elsewhere", Attempt: 1, Repo: "/origin.git", Branch: "kew/elsewhere", Commit: c2, RecordedAt: start.Add(3 * time.Second)},
	}
	if diff := cmp.Diff(want, open); diff != "" {
		t.Fatalf("UnresolvedPushIntents() mismatch (-want +got):\n%s", diff)
	}
	_, nodes, err := l.Run("r1")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if got, wantOpen := n.PushIntent != nil, n.Node != "done"; got != wantOpen {
			t.Errorf("node %s: PushIntent = %+v, want open %v", n.Node, n.PushIntent, wantOpen)
		}
	}
	if err := l.ResolvePushIntent(open[0], true, "the push had landed"); err != nil {
		t.Fatal(err)
	}
	if err := l.ResolvePushIntent(open[1], false, ""); err != nil {
		t.Fatal(err)
	}
	if err := l.ResolvePushIntent(open[0], true, "again"); !errors.Is(err, ErrIntentResolved) {
		t.Errorf("ResolvePushIntent() of a resolved intent = %v, want ErrIntentResolved", err)
	}
	if again, err := l.UnresolvedPushIntents(); err != nil || len(again) != 0 {
		t.Errorf("UnresolvedPushIntents() after resolving = %+v, %v; want none", again, err)
	}
	_, nodes, err = l.Run("r1")
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		Status, Reason, Commit, Branch, Fingerprint string
		Pushed                                      bool
		Attempts                                    int
		Open                                        bool
	}
	got := map[string]outcome{}
	for _, n := range nodes {
		reason := n.Reason
		if n.Status == StatusInterrupted {
			reason = "interrupted"
		}
		got[n.Node] = outcome{n.Status, reason, n.Commit, n.Branch, n.Fingerprint, n.Pushed, n.Attempts, n.PushIntent != nil}
	}
	wantNodes := map[string]outcome{
		"done":      {StatusSucceeded, "", c1, "kew/done", "", true, 1, false},
		"landed":    {StatusSucceeded, "the push had landed", c1, "kew/landed", `{"node":"landed"}`, true, 1, false},
		"elsewhere": {StatusInterrupted, "interrupted", "", "", `{"node":"elsewhere"}`, false, 1, false},
	}
	if diff := cmp.Diff(wantNodes, got); diff != "" {
		t.Errorf("nodes after resolving mismatch (-want +got):\n%s", diff)
	}
}
