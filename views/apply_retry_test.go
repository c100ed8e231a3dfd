package views

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kewplan/kewplan/executor"
	"github.com/kewplan/kewplan/executor/ledger"
)

var retryEvent = executor.NodeRetryEvent{RunID: "r1", Node: "fix", Attempt: 1, NextAttempt: 2, MaxAttempts: 3,
	Class: "api_error", Reason: "api_error: HTTP 529 overloaded\x1b[2J", Wait: 1500 * time.Millisecond,
	Time: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}

// A retry is one node_retry NDJSON event with the attempt, the class, the reason (sanitised) and the wait.
func TestApplyStreamNodeRetry(t *testing.T) {
	var b bytes.Buffer
	newApplyStream(&b).NodeRetry(retryEvent)
	want := `{"attempt":1,"class":"api_error","max_attempts":3,"next_attempt":2,"node":"fix","reason":"api_error: HTTP 529 overloaded[2J","run_id":"r1","time":"2026-11-30T10:00:00Z","type":"node_retry","wait_ms":1500}` + "\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("node_retry (-want +got):\n%s", diff)
	}
}

// The plain display prints a line per retry; a reused node says where it came from.
func TestApplyDisplayRetryAndReuse(t *testing.T) {
	var b bytes.Buffer
	d := newApplyDisplay(&b, false, false)
	d.NodeRetry(retryEvent)
	d.NodeDone(ledger.NodeResult{Node: "impl", Status: ledger.StatusReused, ReusedFrom: "r0"})
	want := "fix: attempt 1 of 3 failed (api_error: HTTP 529 overloaded[2J); retrying in 1.5s\nimpl: reused from run r0 (nothing started)\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("display (-want +got):\n%s", diff)
	}
}
