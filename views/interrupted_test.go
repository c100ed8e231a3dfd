package views

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/kewplan/kewplan/approval"
	"github.com/kewplan/kewplan/executor/ledger"
)

// TestInterruptedSaysSinceWhen: a run whose apply died reads interrupted, and since when, in runs (human and
// JSON), runs show and the receipt's summary.
func TestInterruptedSaysSinceWhen(t *testing.T) {
	start := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	since := start.Add(95 * time.Second)
	run := ledger.RunRecord{ID: "20261130T100000Z-dead01", StartedAt: start, EndedAt: &since, InterruptedSince: &since,
		Status: ledger.RunInterrupted, PID: 4242, Host: "build-7", Nodes: 1}
	nodes := []ledger.NodeRecord{{RunID: run.ID, Node: "fix", Status: ledger.StatusInterrupted, StartedAt: &start, EndedAt: &since,
		Reason: "interrupted: the apply that ran it (kewplan pid 4242 on build-7) ended without recording an outcome (killed, out of memory, or its machine went down); last recorded at 2026-11-30T10:01:35Z"}}
	var list, listJSON, show bytes.Buffer
	if err := writeRunsHuman(&list, []ledger.RunRecord{run}); err != nil {
		t.Fatal(err)
	}
	if err := writeRunsJSON(&listJSON, []ledger.RunRecord{run}); err != nil {
		t.Fatal(err)
	}
	if err := writeRunHuman(&show, &run, nodes); err != nil {
		t.Fatal(err)
	}
	var receipt bytes.Buffer
	WriteReceiptSummary(&receipt, &approval.Receipt{RunID: run.ID, Status: ledger.RunInterrupted, InterruptedSince: &since,
		Plan: approval.ReceiptPlan{Digest: "sha256:p", Saved: true}})
	for _, c := range []struct{ name, out, want string }{
		{"runs", list.String(), "interrupted since 2026-11-30 10:01:35Z"},
		{"runs --json", listJSON.String(), `"interrupted_since": "2026-11-30T10:01:35Z"`},
		{"runs show", show.String(), "interrupted    since 2026-11-30T10:01:35Z"},
		{"runs show (node)", show.String(), "last recorded at 2026-11-30T10:01:35Z"},
		{"receipt", receipt.String(), "Run 20261130T100000Z-dead01: interrupted since 2026-11-30T10:01:35Z (its apply died; the next command wrote this receipt), plan sha256:p."},
	} {
		if !strings.Contains(c.out, c.want) {
			t.Errorf("%s does not say %q:\n%s", c.name, c.want, c.out)
		}
	}
}
