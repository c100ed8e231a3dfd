package ledger

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kewplan/kewplan/executor/statedir"
)

func TestEgressDenialsRoundTrip(t *testing.T) {
	l, err := Open(statedir.Dir{Root: t.TempDir()}.Ledger())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	want := []EgressDenial{
		{RunID: "r1", Node: "fix", Method: "CONNECT", Host: "evil.example.com", Port: 443, Reason: "host not allowed for this node",
			Refusal: "evil.example.com:443 is not in node fix's egress allowlist; the plan allows github.com:443", Time: at},
		{RunID: "r1", Node: "", Method: "CONNECT", Host: "1.2.3.4", Port: 443, Reason: "no proxy credentials", Time: at.Add(time.Second)},
	}
	for _, d := range want {
		if err := l.RecordEgressDenial(d); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.RecordEgressDenial(EgressDenial{RunID: "r2", Host: "other", Port: 1, Time: at}); err != nil {
		t.Fatal(err)
	}
	got, err := l.EgressDenials("r1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("EgressDenials() (-want +got):\n%s", diff)
	}
	if none, err := l.EgressDenials("absent"); err != nil || len(none) != 0 {
		t.Errorf("EgressDenials(absent) = %v, %v", none, err)
	}
}
