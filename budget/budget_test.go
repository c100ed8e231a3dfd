package budget_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kewplan/kewplan/budget"
	"github.com/kewplan/kewplan/runners"
)

// event is a non-OK decision at a line (1-based), as the tests assert it.
type event struct {
	Line     int
	Kind     string
	Decision string
	Source   string
}

func price(t *testing.T, model string) *runners.Price {
	t.Helper()
	e, ok := runners.BuiltinPriceTable().Lookup(model)
	if !ok {
		t.Fatalf("no built-in price for %q", model)
	}
	return &e.Price
}

func readLines(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines [][]byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		lines = append(lines, append([]byte(nil), sc.Bytes()...))
	}
	return lines
}

// run feeds a stream to a tracker and collects its decisions (the first Exceeded only) and notifications.
func run(t *testing.T, path string, cfg budget.NodeConfig) ([]event, []string, budget.Usage) {
	t.Helper()
	meter, ok := runners.NewMeter(cfg.Protocol, "routed-model")
	if !ok {
		t.Fatalf("no meter for %q", cfg.Protocol)
	}
	var notified []string
	tr := budget.NewTracker(meter, cfg, func(d budget.Decision) { notified = append(notified, d.String()) })
	var events []event
	exceeded := false
	for i, line := range readLines(t, path) {
		before := len(notified)
		tr.Line(line)
		d, isExceeded := tr.Exceeded()
		switch {
		case isExceeded && !exceeded:
			exceeded = true
			events = append(events, event{i + 1, d.Kind.String(), d.String(), d.Source})
		case len(notified) > before && !isExceeded:
			events = append(events, event{i + 1, "warn", notified[len(notified)-1], ""})
		}
	}
	return events, notified, tr.Usage()
}

func TestTracker(t *testing.T) {
	sonnet := price(t, "claude-sonnet-4-5")
	tests := []struct {
		name      string
		stream    string
		cfg       budget.NodeConfig
		want      []event
		wantUsage budget.Usage
	}{
		{
			// The done-when stream: two turns of 100,000 input and 20,000 output tokens at 0.60 USD each.
			name:   "done-when",
			stream: "testdata/done-when.ndjson",
			cfg:    budget.NodeConfig{Node: "fix", Protocol: "claude-code", Caps: budget.Caps{MaxUSD: 1.0, WarnAt: 0.5}, Price: sonnet},
			want: []event{
				{2, "warn", "warn_at 0.5 of max_usd 1.00 crossed at 0.60", ""},
				{4, "exceeded", "max_usd 1.00 reached at 1.20", "estimated"},
			},
			wantUsage: budget.Usage{CostUSD: 1.2, CostSource: "estimated", Tokens: 240000, Turns: 2},
		},
		{
			name:      "usage never reported",
			stream:    "testdata/never-usage.ndjson",
			cfg:       budget.NodeConfig{Node: "n", Protocol: "claude-code", Caps: budget.Caps{MaxUSD: 0.01, MaxTurns: 5}, Price: sonnet},
			wantUsage: budget.Usage{CostSource: "unknown", Turns: 2},
		},
		{
			// Hermes gives tokens only in its result: the cost is unknown until then, and estimated at the end.
			name:   "usage only in the final event",
			stream: "testdata/final-only.ndjson",
			cfg:    budget.NodeConfig{Node: "n", Protocol: "hermes", Caps: budget.Caps{MaxUSD: 1.0}, Price: price(t, "anthropic/claude-sonnet-4.5")},
			want: []event{
				{5, "exceeded", "max_usd 1.00 reached at 1.50", "estimated"},
			},
			wantUsage: budget.Usage{CostUSD: 1.5, CostSource: "estimated", Tokens: 340000},
		},
		{
			// Three content blocks of one message repeat its usage: counted once (0.60, not 1.80).
			name:      "repeated message id",
			stream:    "testdata/repeated-id.ndjson",
			cfg:       budget.NodeConfig{Node: "n", Protocol: "claude-code", Caps: budget.Caps{MaxUSD: 1.0, MaxTurns: 1}, Price: sonnet},
			wantUsage: budget.Usage{CostUSD: 0.6, CostSource: "reported", Tokens: 120000, Turns: 1},
		},
		{
			name:   "max_tokens",
			stream: "testdata/done-when.ndjson",
			cfg:    budget.NodeConfig{Node: "n", Protocol: "claude-code", Caps: budget.Caps{MaxTokens: 200000}},
			want: []event{
				{4, "exceeded", "max_tokens 200000 reached at 240000", ""},
			},
			wantUsage: budget.Usage{CostSource: "unknown", Tokens: 240000, Turns: 2},
		},
		{
			name:   "max_turns",
			stream: "testdata/done-when.ndjson",
			cfg:    budget.NodeConfig{Node: "n", Protocol: "claude-code", Caps: budget.Caps{MaxTurns: 1, MaxUSD: 5}, Price: sonnet},
			want: []event{
				{4, "exceeded", "max_turns 1 reached at 2", ""},
			},
			wantUsage: budget.Usage{CostUSD: 1.2, CostSource: "estimated", Tokens: 240000, Turns: 2},
		},
		{
			// A real Claude Code run: estimated live, the agent's own total once the result arrives.
			name:      "claude-code real stream",
			stream:    "../runners/testdata/streams/claude-code/tool.ndjson",
			cfg:       budget.NodeConfig{Node: "n", Protocol: "claude-code", Caps: budget.Caps{MaxUSD: 1}, Price: sonnet},
			wantUsage: budget.Usage{CostUSD: 0.0072675, CostSource: "reported", Tokens: 958, Turns: 2},
		},
		{
			// opencode reports cost per step: live and reported, with no price needed.
			name:   "opencode reports live",
			stream: "../runners/testdata/streams/opencode/tool.ndjson",
			cfg:    budget.NodeConfig{Node: "n", Protocol: "opencode", Caps: budget.Caps{MaxUSD: 0.001}},
			want: []event{
				{0, "exceeded", "max_usd 0.001 reached at 0.00432", "reported"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, notified, usage := run(t, tt.stream, tt.cfg)
			if tt.want != nil && tt.want[0].Line == 0 {
				// The line is the stream's business; only the decision is asserted.
				for i := range got {
					got[i].Line = 0
				}
			} else if diff := cmp.Diff(tt.wantUsage, usage, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
				t.Errorf("Usage() mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("decisions mismatch (-want +got):\n%s", diff)
			}
			exceeded := 0
			for _, n := range notified {
				if len(n) > 0 && n[0] != 'w' {
					exceeded++
				}
			}
			if exceeded > 1 {
				t.Errorf("notify called %d times for Exceeded, want once: %q", exceeded, notified)
			}
		})
	}
}

// TestTrackerSticky: once exceeded, every later line says so, and notify is not called again.
func TestTrackerSticky(t *testing.T) {
	meter, _ := runners.NewMeter("claude-code", "")
	calls := 0
	tr := budget.NewTracker(meter, budget.NodeConfig{Protocol: "claude-code", Caps: budget.Caps{MaxUSD: 1}, Price: price(t, "claude-sonnet-4-5")},
		func(budget.Decision) { calls++ })
	var last budget.Decision
	for _, l := range readLines(t, "testdata/done-when.ndjson") {
		tr.Line(l)
		last = tr.Observe([]byte(`{"type":"user"}`))
	}
	if last.Kind != budget.Exceeded || calls != 1 {
		t.Errorf("last decision %v after %d notifications, want exceeded after 1", last, calls)
	}
}

// TestApply: two nodes at 0.60 each cross an apply-wide 1.00; the callback fires once, and both trackers stop.
func TestApply(t *testing.T) {
	var fired []string
	var mu sync.Mutex
	apply := budget.NewApply(1.0, func(d budget.Decision) {
		mu.Lock()
		fired = append(fired, d.String())
		mu.Unlock()
	})
	sonnet := price(t, "claude-sonnet-4-5")
	lines := readLines(t, "testdata/done-when.ndjson")[:3] // one turn: 0.60
	trackers := map[string]*budget.Tracker{}
	for _, n := range []string{"a", "b"} {
		m, _ := runners.NewMeter("claude-code", "")
		trackers[n] = budget.NewTracker(m, budget.NodeConfig{Node: n, Protocol: "claude-code", Caps: budget.Caps{MaxUSD: 5}, Price: sonnet, Apply: apply}, nil)
	}
	for _, l := range lines {
		trackers["a"].Line(l)
	}
	if _, ok := apply.Exceeded(); ok {
		t.Fatal("apply exceeded after one node's 0.60")
	}
	var d budget.Decision
	for _, l := range lines {
		d = trackers["b"].Observe(l)
	}
	if d.Kind != budget.Exceeded || d.Scope != budget.ScopeApply || d.String() != "apply-wide max_usd 1.00 reached at 1.20" {
		t.Errorf("b's decision = %+v (%s), want the apply-wide exceeded", d, d)
	}
	if got := trackers["a"].Observe([]byte(`{"type":"user"}`)); got.Kind != budget.Exceeded || got.Scope != budget.ScopeApply {
		t.Errorf("a's next decision = %+v, want the apply-wide exceeded", got)
	}
	want := budget.Total{CostUSD: 1.2, CostSource: "estimated", Estimated: []string{"a", "b"}, Unknown: []string{}, MaxUSD: 1}
	if diff := cmp.Diff(want, apply.Total(), cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("Total() mismatch (-want +got):\n%s", diff)
	}
	if len(fired) != 1 {
		t.Errorf("onExceeded fired %d times, want once: %q", len(fired), fired)
	}
}

// TestApplyConcurrent feeds many nodes at once (run with -race): the total is exact and the callback fires once.
func TestApplyConcurrent(t *testing.T) {
	var fired int
	var mu sync.Mutex
	apply := budget.NewApply(5.0, func(budget.Decision) { mu.Lock(); fired++; mu.Unlock() })
	sonnet := price(t, "claude-sonnet-4-5")
	lines := readLines(t, "testdata/done-when.ndjson")
	var wg sync.WaitGroup
	const nodes = 16
	for i := 0; i < nodes; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			m, _ := runners.NewMeter("claude-code", "")
			tr := budget.NewTracker(m, budget.NodeConfig{Node: fmt.Sprint("n", i), Protocol: "claude-code", Price: sonnet, Apply: apply}, nil)
			for _, l := range lines {
				tr.Line(l)
			}
		}(i)
	}
	wg.Wait()
	total := apply.Total()
	if diff := cmp.Diff(1.2*nodes, total.CostUSD, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("total mismatch (-want +got):\n%s", diff)
	}
	if fired != 1 {
		t.Errorf("onExceeded fired %d times, want once", fired)
	}
}

// TestUnknownPriceIsNotZero: without a price and without a reported cost, the cost is unknown and a max_usd is
// never taken as met by a made-up 0.
func TestUnknownPriceIsNotZero(t *testing.T) {
	_, _, usage := run(t, "testdata/done-when.ndjson", budget.NodeConfig{Protocol: "claude-code", Caps: budget.Caps{MaxUSD: 1}})
	if usage.CostSource != budget.SourceUnknown {
		t.Errorf("cost source = %q, want unknown", usage.CostSource)
	}
}

// TestTrackerJudgesTheLargerMeter: an agent that prints tiny usage is stopped on the proxy's figures, whichever
// goroutine they come from, and the decision names both; warn_at fires on the proxy's figures too.
func TestTrackerJudgesTheLargerMeter(t *testing.T) {
	meter, _ := runners.NewMeter("claude-code", "claude-sonnet-4-5")
	var mu sync.Mutex
	var notified []budget.Decision
	tr := budget.NewTracker(meter, budget.NodeConfig{Node: "fix", Protocol: "claude-code", Price: price(t, "claude-sonnet-4-5"),
		Caps: budget.Caps{MaxUSD: 1, MaxTurns: 10, WarnAt: 0.5}}, func(d budget.Decision) {
		mu.Lock()
		notified = append(notified, d)
		mu.Unlock()
	})
	tr.Line([]byte(`{"type":"assistant","message":{"id":"m1","model":"claude-sonnet-4-5","content":[],"usage":{"input_tokens":1000,"output_tokens":200}}}`))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tr.Proxy(budget.ProxyUsage{Calls: 2, Tokens: 200_000, CostUSD: 0.6, CostSource: budget.SourceEstimated})
	}()
	wg.Wait()
	tr.Proxy(budget.ProxyUsage{Calls: 4, Tokens: 400_000, CostUSD: 1.2, CostSource: budget.SourceEstimated})
	if len(notified) != 2 || notified[0].Kind != budget.Warn || notified[1].Kind != budget.Exceeded {
		t.Fatalf("notified %+v, want a warning, then exceeded", notified)
	}
	want := "max_usd 1.00 reached at 1.20 (the agent reported 0.006, the proxy metered 1.20)"
	if got := notified[1].String(); got != want {
		t.Errorf("decision %q, want %q", got, want)
	}
	if u := tr.Usage(); u.Tokens != 400_000 || u.Turns != 4 || u.CostSource != budget.SourceEstimated {
		t.Errorf("usage %+v, want the proxy's figures", u)
	}
	agent, proxy, ok := tr.Meters()
	if !ok || agent.Tokens != 1200 || proxy.Tokens != 400_000 {
		t.Errorf("meters: agent %+v, proxy %+v (%v)", agent, proxy, ok)
	}
}

// TestTrackerTurnsAtTheProxy: max_turns holds on the proxy's count of model calls when the agent shows none.
func TestTrackerTurnsAtTheProxy(t *testing.T) {
	meter, _ := runners.NewMeter("claude-code", "claude-sonnet-4-5")
	tr := budget.NewTracker(meter, budget.NodeConfig{Node: "fix", Protocol: "claude-code", Caps: budget.Caps{MaxTurns: 3}}, nil)
	tr.Proxy(budget.ProxyUsage{Calls: 3, CostSource: budget.SourceUnknown})
	if _, ok := tr.Exceeded(); ok {
		t.Fatal("3 calls exceeded max_turns 3")
	}
	tr.Proxy(budget.ProxyUsage{Calls: 4, CostSource: budget.SourceUnknown})
	d, ok := tr.Exceeded()
	if !ok || d.String() != "max_turns 3 reached at 4 (the agent reported 0, the proxy metered 4)" {
		t.Errorf("decision %q (%v)", d.String(), ok)
	}
}

// TestApplyWideOnTheProxysFigures: the apply-wide max_usd sums each node's larger figure, so two agents that
// print nothing still stop the apply once the proxy's figures cross it.
func TestApplyWideOnTheProxysFigures(t *testing.T) {
	fired := 0
	apply := budget.NewApply(1, func(budget.Decision) { fired++ })
	var trackers []*budget.Tracker
	for _, n := range []string{"a", "b"} {
		m, _ := runners.NewMeter("claude-code", "claude-sonnet-4-5")
		trackers = append(trackers, budget.NewTracker(m, budget.NodeConfig{Node: n, Protocol: "claude-code", Price: price(t, "claude-sonnet-4-5"), Apply: apply}, nil))
	}
	trackers[0].Proxy(budget.ProxyUsage{Calls: 1, Tokens: 200_000, CostUSD: 0.6, CostSource: budget.SourceEstimated})
	if _, ok := apply.Exceeded(); ok {
		t.Fatal("the apply stopped at $0.60 of $1")
	}
	trackers[1].Proxy(budget.ProxyUsage{Calls: 1, Tokens: 200_000, CostUSD: 0.6, CostSource: budget.SourceEstimated})
	d, ok := apply.Exceeded()
	if !ok || fired != 1 || d.Scope != budget.ScopeApply || d.Value != 1.2 {
		t.Errorf("apply decision %+v (%v), fired %d; want exceeded at 1.20 once", d, ok, fired)
	}
}
