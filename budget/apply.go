package budget

import (
	"sort"
	"sync"
)

// Apply sums the spend of every node of an apply against the apply-wide max_usd. It is safe for concurrent use:
// each node's Tracker reports to it from its own goroutine.
type Apply struct {
	maxUSD     float64
	onExceeded func(Decision)

	mu       sync.Mutex
	nodes    map[string]Usage
	total    float64
	exceeded *Decision
}

// NewApply tracks an apply whose max_usd is maxUSD (0: no apply-wide cap, the total is still kept). onExceeded,
// when not nil, is called once, when the total first crosses the cap, from the goroutine of the node whose line
// crossed it: it must not block. The executor then starts nothing new and stops the running nodes.
func NewApply(maxUSD float64, onExceeded func(Decision)) *Apply {
	return &Apply{maxUSD: maxUSD, onExceeded: onExceeded, nodes: map[string]Usage{}}
}

// update records a node's spend so far and returns Exceeded once the total has crossed the cap (and from then
// on), else OK.
func (a *Apply) update(node string, u Usage) Decision {
	a.mu.Lock()
	prev := a.nodes[node]
	a.nodes[node] = u
	a.total += u.CostUSD - prev.CostUSD
	var fire *Decision
	if a.exceeded == nil && a.maxUSD > 0 && a.total > a.maxUSD {
		d := Decision{Kind: Exceeded, Scope: ScopeApply, Cap: CapMaxUSD, Limit: a.maxUSD, Value: a.total, Source: a.sourceLocked()}
		a.exceeded, fire = &d, &d
	}
	var out Decision
	if a.exceeded != nil {
		out = *a.exceeded
	}
	a.mu.Unlock()
	if fire != nil && a.onExceeded != nil {
		a.onExceeded(*fire)
	}
	return out
}

// Record sets a node's final spend (for a node whose run ended, or was never tracked line by line) and returns the
// apply-wide decision, as a line would.
func (a *Apply) Record(node string, u Usage) Decision { return a.update(node, u) }

// Exceeded returns the decision that stopped the apply, if the total crossed max_usd: before starting a node, the
// executor asks, and starts nothing once it is true.
func (a *Apply) Exceeded() (Decision, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.exceeded == nil {
		return Decision{}, false
	}
	return *a.exceeded, true
}

// Total is the apply's spend so far.
type Total struct {
	CostUSD float64 `json:"cost_usd"`
	// CostSource is "reported" when every node's cost is the agent's own, "estimated" when any is an estimate, and
	// "unknown" when any node's cost is unknown (then CostUSD is a lower bound).
	CostSource string `json:"cost_source"`
	// Estimated and Unknown name the nodes whose cost is an estimate, or unknown, sorted.
	Estimated []string `json:"estimated"`
	Unknown   []string `json:"unknown"`
	MaxUSD    float64  `json:"max_usd"` // 0: no apply-wide cap
}

// Total reports the spend of every node so far.
func (a *Apply) Total() Total {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := Total{CostUSD: a.total, CostSource: a.sourceLocked(), Estimated: []string{}, Unknown: []string{}, MaxUSD: a.maxUSD}
	for n, u := range a.nodes {
		switch u.CostSource {
		case SourceEstimated:
			t.Estimated = append(t.Estimated, n)
		case SourceUnknown:
			t.Unknown = append(t.Unknown, n)
		}
	}
	sort.Strings(t.Estimated)
	sort.Strings(t.Unknown)
	return t
}

func (a *Apply) sourceLocked() string {
	src := SourceReported
	for _, u := range a.nodes {
		switch u.CostSource {
		case SourceUnknown:
			return SourceUnknown
		case SourceEstimated:
			src = SourceEstimated
		}
	}
	return src
}
