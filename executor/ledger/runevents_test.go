package ledger

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kewplan/kewplan/executor/statedir"
)

func TestRunEventsRoundTrip(t *testing.T) {
	l, err := Open(statedir.Dir{Root: t.TempDir()}.Ledger())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	at := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	want := []RunEvent{
		{RunID: "r1", Kind: RunEventProxyExited, Nodes: "fix", Message: "kewplan's egress proxy exited with status 137 while fix ran", Time: at},
		{RunID: "r1", Kind: RunEventProxyRestarted, Nodes: "fix", Message: "started again at the same addresses", Time: at.Add(time.Second)},
	}
	for _, e := range append(want[:1:1], RunEvent{RunID: "r2", Kind: RunEventProxyLost, Time: at}, want[1]) {
		if err := l.RecordRunEvent(e); err != nil {
			t.Fatal(err)
		}
	}
	got, err := l.RunEvents("r1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("RunEvents() (-want +got):\n%s", diff)
	}
	if none, err := l.RunEvents("absent"); err != nil || len(none) != 0 {
		t.Errorf("RunEvents(absent) = %v, %v", none, err)
	}
}
