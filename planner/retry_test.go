package planner

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"

	"github.com/kewplan/kewplan/config"
)

func TestRetryWait(t *testing.T) {
	mid := func() float64 { return 0.5 } // factor 1: the nominal wait
	low := func() float64 { return 0 }   // factor 0.8
	high := func() float64 { return 0.999999 }
	tests := []struct {
		name    string
		backoff time.Duration
		attempt int
		rnd     func() float64
		want    time.Duration
	}{
		{"first retry waits the backoff", 10 * time.Second, 1, mid, 10 * time.Second},
		{"doubled for the second", 10 * time.Second, 2, mid, 20 * time.Second},
		{"doubled again", 10 * time.Second, 3, mid, 40 * time.Second},
		{"capped at 5m", 10 * time.Second, 9, mid, 5 * time.Minute},
		{"jitter down 20%", 10 * time.Second, 1, low, 8 * time.Second},
		{"jitter up stays under 12s", 10 * time.Second, 1, high, 11999996 * time.Microsecond},
		{"jitter never passes the cap", 10 * time.Minute, 1, high, 5 * time.Minute},
		{"jitter below the cap at the cap", 10 * time.Minute, 1, low, 4 * time.Minute},
		{"zero backoff retries at once", 0, 3, mid, 0},
		{"attempt 0 is read as 1", time.Second, 0, mid, time.Second},
		{"out-of-range random is read as the middle", time.Second, 1, func() float64 { return 7 }, time.Second},
		{"no overflow after many doublings", time.Hour, 60, mid, 5 * time.Minute},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := RetryWait(tc.backoff, tc.attempt, tc.rnd)
			if got.Round(time.Microsecond) != tc.want {
				t.Errorf("RetryWait(%s, %d) = %s, want %s", tc.backoff, tc.attempt, got, tc.want)
			}
		})
	}
	// The default random source stays within the jitter bounds.
	for i := 0; i < 100; i++ {
		if got := RetryWait(10*time.Second, 1, nil); got < 8*time.Second || got >= 12*time.Second {
			t.Fatalf("RetryWait with the default source = %s, outside [8s, 12s)", got)
		}
	}
}

func TestRetrySchedule(t *testing.T) {
	p := RetryPolicy{Attempts: 4, Backoff: time.Minute}
	want := []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute}
	if diff := cmp.Diff(want, RetrySchedule(p)); diff != "" {
		t.Errorf("RetrySchedule() mismatch (-want +got):\n%s", diff)
	}
	if got := RetrySchedule(RetryPolicy{Attempts: 1}); got != nil {
		t.Errorf("RetrySchedule(1 attempt) = %v, want none", got)
	}
}

func TestEffectiveRetry(t *testing.T) {
	at := func(line int) hcl.Range { return hcl.Range{Filename: "main.hcl", Start: hcl.Pos{Line: line}} }
	sandbox := &config.Retry{Attempts: 3, AttemptsRange: at(3), Backoff: time.Second, BackoffRange: at(4),
		On: []string{"timeout", "api_error"}, OnRange: at(5), DeclRange: at(2)}
	node := &config.Retry{Attempts: 2, AttemptsRange: at(11), DeclRange: at(10)}
	tests := []struct {
		name        string
		sb, node    *config.Retry
		want        RetryPolicy
		retriesTime bool // Retries("timeout", 1)
	}{
		{"defaults", nil, nil, RetryPolicy{Attempts: 1, Backoff: 10 * time.Second, On: config.RetryClasses,
			Origins: map[string]string{"attempts": "default", "backoff": "default", "on": "default"}}, false},
		{"sandbox", sandbox, nil, RetryPolicy{Attempts: 3, Backoff: time.Second, On: []string{"api_error", "timeout"},
			Origins: map[string]string{"attempts": "sandbox main.hcl:2", "backoff": "sandbox main.hcl:2", "on": "sandbox main.hcl:2"}}, true},
		{"node replaces one attribute", sandbox, node, RetryPolicy{Attempts: 2, Backoff: time.Second, On: []string{"api_error", "timeout"},
			Origins: map[string]string{"attempts": "node main.hcl:10", "backoff": "sandbox main.hcl:2", "on": "sandbox main.hcl:2"}}, true},
		{"node alone", nil, node, RetryPolicy{Attempts: 2, Backoff: 10 * time.Second, On: config.RetryClasses,
			Origins: map[string]string{"attempts": "node main.hcl:10", "backoff": "default", "on": "default"}}, true},
		{"empty on retries nothing", nil, &config.Retry{Attempts: 3, AttemptsRange: at(11), On: []string{}, OnRange: at(12), DeclRange: at(10)},
			RetryPolicy{Attempts: 3, Backoff: 10 * time.Second, On: []string{},
				Origins: map[string]string{"attempts": "node main.hcl:10", "backoff": "default", "on": "node main.hcl:10"}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := effectiveRetry(tc.sb, tc.node)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("effectiveRetry() mismatch (-want +got):\n%s", diff)
			}
			if got.Retries(config.RetryOnTimeout, 1) != tc.retriesTime {
				t.Errorf("Retries(timeout, 1) = %v, want %v", !tc.retriesTime, tc.retriesTime)
			}
			if got.Retries(config.RetryOnTimeout, got.Attempts) {
				t.Error("Retries after the last attempt")
			}
		})
	}
}

func TestRetryDescribe(t *testing.T) {
	p := RetryPolicy{Attempts: 3, Backoff: 10 * time.Second, On: config.RetryClasses}
	if got, want := p.Describe(), "3 attempts on api_error, engine_error, timeout; backoff 10s doubling, capped 5m"; got != want {
		t.Errorf("Describe() = %q, want %q", got, want)
	}
}
