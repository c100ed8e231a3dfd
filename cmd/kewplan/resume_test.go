package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/views"
)

// runs show: attempt rows become the view's attempts, a reused node its run, a node without rows no entry.
func TestNodeHistoryFromAttempts(t *testing.T) {
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	exit := int64(1)
	nodes := []ledger.NodeRecord{{Node: "impl", Status: "reused", ReusedFrom: "r0"}, {Node: "fix", Status: "failed"}, {Node: "docs", Status: "skipped"}}
	attempts := map[string][]ledger.AttemptRecord{"fix": {
		{Attempt: 1, Status: "failed", ExitCode: &exit, StopReason: "api_error: HTTP 529 overloaded", RetryWait: 1100 * time.Millisecond, StartedAt: &at, InputTokens: 5, StdoutLog: "/l/fix.stdout.log"},
		{Attempt: 2, Status: "failed", ExitCode: &exit, StopReason: "api_error: HTTP 529 overloaded", StartedAt: &at, StdoutLog: "/l/fix.a2.stdout.log"},
	}}
	want := map[string]views.NodeHistory{
		"impl": {ReusedFrom: "r0"},
		"fix": {Attempts: []views.AttemptJSON{
			{Attempt: 1, Status: "failed", ExitCode: &exit, StopReason: "api_error: HTTP 529 overloaded", RetryWait: "1.1s", StartedAt: &at, InputTokens: 5, StdoutLog: "/l/fix.stdout.log"},
			{Attempt: 2, Status: "failed", ExitCode: &exit, StopReason: "api_error: HTTP 529 overloaded", StartedAt: &at, StdoutLog: "/l/fix.a2.stdout.log"},
		}},
	}
	if diff := cmp.Diff(want, nodeHistory(nodes, attempts)); diff != "" {
		t.Errorf("nodeHistory() mismatch (-want +got):\n%s", diff)
	}
}
