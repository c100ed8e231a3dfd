package adapter

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/planner"
)

// TestBrokerEndsAt: a node's backstop counts every node that may run before it ends (its own attempts, its
// upstreams, nodes beside it), each attempt at its timeout and the margin, and no node downstream of it.
func TestBrokerEndsAt(t *testing.T) {
	start := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	p := &planner.Plan{Nodes: []*planner.NodePlan{
		{Name: "a", Timeout: 10 * time.Minute},
		{Name: "b", Timeout: 20 * time.Minute, DependsOn: []string{"a"}, Retry: planner.RetryPolicy{Attempts: 2}},
		{Name: "c", DependsOn: []string{"b"}},
		{Name: "side", Timeout: 5 * time.Minute},
		{Name: "broken", Errors: true},
	}}
	m := BackstopMargin
	want := map[string]time.Duration{
		// a: c and b are downstream of it.
		"a": (10*time.Minute + m) + (5*time.Minute + m),
		// b: a, b's two attempts and the longest wait between them, side.
		"b": (10*time.Minute + m) + 2*(20*time.Minute+m) + config.MaxRetryBackoff + (5*time.Minute + m),
		// c: everything; c has no timeout, so the default.
		"c":    (10*time.Minute + m) + 2*(20*time.Minute+m) + config.MaxRetryBackoff + (DefaultTimeout + m) + (5*time.Minute + m),
		"side": (10*time.Minute + m) + 2*(20*time.Minute+m) + config.MaxRetryBackoff + (DefaultTimeout + m) + (5*time.Minute + m),
	}
	got := map[string]time.Duration{}
	for _, np := range p.Nodes[:4] {
		got[np.Name] = BrokerEndsAt(p, np, start).Sub(start)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("backstops after the start (-want +got):\n%s", diff)
	}
}
