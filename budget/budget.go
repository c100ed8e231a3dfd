package budget

import (
	"fmt"
	"strconv"
	"sync"

	"github.com/kewplan/kewplan/internal/money"
	"github.com/kewplan/kewplan/runners"
)

// Cap names, as the configuration writes them.
const (
	CapMaxUSD    = "max_usd"
	CapMaxTokens = "max_tokens"
	CapMaxTurns  = "max_turns"
)

// Cost sources: where a cost figure came from.
const (
	SourceReported  = "reported"  // the agent's own figure
	SourceProvider  = "provider"  // the provider's own figure, read from its answers by kewplan's proxy
	SourceEstimated = "estimated" // tokens × price
	SourceUnknown   = "unknown"   // no usage seen, or no price and no reported cost
)

// Scopes of a decision.
const (
	ScopeNode  = "node"  // the node's own cap
	ScopeApply = "apply" // the apply-wide max_usd
)

// Caps are one node's effective caps. A zero field is no cap: configuration refuses zero and negative caps, so
// zero cannot mean anything else.
type Caps struct {
	MaxUSD    float64
	MaxTokens int64
	MaxTurns  int64
	WarnAt    float64 // a fraction of each cap in (0, 1); 0: no warning
}

// Usage is what a run has spent so far.
type Usage struct {
	CostUSD    float64 `json:"cost_usd"`
	CostSource string  `json:"cost_source"`
	// Tokens counts input + output + cache writes: what max_tokens caps. Cache reads are cheap and not counted.
	Tokens int64 `json:"tokens"`
	Turns  int64 `json:"turns"`
}

// Kind is what a decision asks of the executor.
type Kind int

const (
	// OK: carry on.
	OK Kind = iota
	// Warn: the run crossed warn_at of a cap, for the first time; raise a budget_warning and carry on.
	Warn
	// Exceeded: the run crossed a cap; stop it and record budget_exceeded.
	Exceeded
)

func (k Kind) String() string {
	switch k {
	case Warn:
		return "warn"
	case Exceeded:
		return "exceeded"
	}
	return "ok"
}

// Decision is the verdict after one line.
type Decision struct {
	Kind  Kind
	Scope string  // ScopeNode or ScopeApply; "" when OK
	Cap   string  // CapMaxUSD, CapMaxTokens or CapMaxTurns; "" when OK
	Limit float64 // the cap
	Value float64 // the figure that crossed it (the node's, or for ScopeApply the apply's total)
	// WarnAt is the fraction that was crossed, for Warn.
	WarnAt float64
	// Source is the cost source of Value when Cap is max_usd.
	Source string
	// Metered is set when the node's model calls were also metered by kewplan's proxy: Value is then the larger
	// of Agent (the agent's own stream) and Proxy (the provider's figures, read by the proxy).
	Metered      bool
	Agent, Proxy float64
	// AgentUnknown is set when the agent's cost is unknown (Cap max_usd).
	AgentUnknown bool
}

// String renders the decision for people and the ledger: "max_usd 1.50 reached at 1.62".
func (d Decision) String() string {
	switch d.Kind {
	case Exceeded:
		lim, val := formatFigures(d.Cap, d.Limit, d.Value)
		s := fmt.Sprintf("%s %s reached at %s", d.Cap, lim, val)
		if d.Scope == ScopeApply {
			s = "apply-wide " + s
		}
		if d.Metered {
			_, agent := formatFigures(d.Cap, d.Limit, d.Agent)
			_, proxy := formatFigures(d.Cap, d.Limit, d.Proxy)
			if d.AgentUnknown {
				agent = "no cost"
			}
			s += fmt.Sprintf(" (the agent reported %s, the proxy metered %s)", agent, proxy)
		}
		return s
	case Warn:
		lim, val := formatFigures(d.Cap, d.Limit, d.Value)
		return fmt.Sprintf("warn_at %s of %s %s crossed at %s", strconv.FormatFloat(d.WarnAt, 'f', -1, 64), d.Cap, lim, val)
	}
	return "ok"
}

// formatFigures renders a cap and a figure: whole numbers for tokens and turns, dollars as internal/money writes
// them (never a figure over its cap as equal to it).
func formatFigures(capName string, limit, value float64) (string, string) {
	if capName != CapMaxUSD {
		return strconv.FormatFloat(limit, 'f', 0, 64), strconv.FormatFloat(value, 'f', 0, 64)
	}
	return money.Distinct(limit, value)
}

// NodeConfig is what a Tracker needs to know of its node, from the plan.
type NodeConfig struct {
	Node     string
	Protocol string // the stdout vocabulary; decides whether the agent's own cost is live
	Caps     Caps
	// Price is the routed model's price; nil when it has none (then the cost is reported or unknown, never 0).
	Price *runners.Price
	// Apply is the apply-wide tracker the node adds to; nil when the apply is not tracked.
	Apply *Apply
}

// ProxyUsage is what kewplan's egress proxy metered for a node from the provider's own answers to its model
// calls (brokered credentials): the second meter, which the agent does not write.
type ProxyUsage struct {
	Calls  int64 `json:"calls"`  // model calls, those refused at a cap included: what max_turns counts
	Tokens int64 `json:"tokens"` // input + output + cache writes, as Usage.Tokens
	// CostUSD and CostSource: the provider's own figure (reported), tokens × price (estimated), or unknown.
	CostUSD    float64 `json:"cost_usd"`
	CostSource string  `json:"cost_source"`
}

// Tracker follows one node's run. It is a runners.Meter that wraps the node's own meter, so the executor feeds
// it with runners.Feed exactly as it fed the meter; the proxy's figures arrive through Proxy, from another
// goroutine, and every cap is judged on the larger of the two meters.
type Tracker struct {
	meter    runners.Meter
	cfg      NodeConfig
	liveCost bool
	notify   func(Decision)

	mu       sync.Mutex
	agent    Usage       // the agent's stream
	proxy    *ProxyUsage // nil until the proxy metered a call
	usage    Usage       // the larger of the two, judged
	warned   bool
	exceeded *Decision
}

// NewTracker wraps meter for one node. notify, when not nil, is called from Line on each Warn and on the first
// Exceeded (of the node, or of the apply seen through this node); it runs on the goroutine that feeds lines, so it
// must not block (signal the kill, do not wait for it).
func NewTracker(meter runners.Meter, cfg NodeConfig, notify func(Decision)) *Tracker {
	t := &Tracker{meter: meter, cfg: cfg, liveCost: runners.ReportsCostLive(cfg.Protocol), notify: notify}
	t.usage.CostSource = SourceUnknown
	t.agent.CostSource = SourceUnknown
	if cfg.Apply != nil {
		cfg.Apply.update(cfg.Node, t.usage)
	}
	return t
}

// Line observes one stdout line (runners.Meter), calling notify on a transition.
func (t *Tracker) Line(line []byte) {
	t.mu.Lock()
	wasExceeded := t.exceeded != nil
	t.mu.Unlock()
	t.report(wasExceeded, t.Observe(line))
}

// Proxy takes the proxy's figures for the node so far and judges them with the agent's, calling notify on a
// transition as Line does. It may be called from any goroutine.
func (t *Tracker) Proxy(p ProxyUsage) {
	t.mu.Lock()
	wasExceeded := t.exceeded != nil
	t.proxy = &p
	d := t.judge()
	t.mu.Unlock()
	t.report(wasExceeded, d)
}

func (t *Tracker) report(wasExceeded bool, d Decision) {
	if t.notify == nil || d.Kind == OK || d.Kind == Exceeded && wasExceeded {
		return
	}
	t.notify(d)
}

// Oversized records a skipped oversized line (runners.Meter).
func (t *Tracker) Oversized() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.meter.Oversized()
}

// Totals reports the wrapped meter's totals (runners.Meter).
func (t *Tracker) Totals() runners.RunTotals {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.meter.Totals()
}

// Usage is the spend so far: the larger of the two meters.
func (t *Tracker) Usage() Usage {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.usage
}

// Meters are the two meters apart: the agent's stream, and the proxy's figures (ok false when the proxy
// metered no call of the node).
func (t *Tracker) Meters() (agent Usage, proxy ProxyUsage, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.proxy != nil {
		proxy, ok = *t.proxy, true
	}
	return t.agent, proxy, ok
}

// Exceeded returns the decision that stopped the node, if any.
func (t *Tracker) Exceeded() (Decision, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.exceeded == nil {
		return Decision{}, false
	}
	return *t.exceeded, true
}

// Observe feeds one line to the meter and decides. Warn is returned once, on the line that first crosses
// warn_at; Exceeded on the line that crosses a cap and on every line after it (the run must stop).
func (t *Tracker) Observe(line []byte) Decision {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.meter.Line(line)
	t.agent = t.measure()
	return t.judge()
}

// judge combines the two meters (the larger of each figure) and decides; t.mu is held.
func (t *Tracker) judge() Decision {
	t.usage = larger(t.agent, t.proxy)
	var ad Decision
	if t.cfg.Apply != nil {
		// Spend goes on counting until the container is gone: the apply's total stays true.
		ad = t.cfg.Apply.update(t.cfg.Node, t.usage)
	}
	if t.exceeded != nil {
		return *t.exceeded
	}
	d := t.check()
	switch {
	case d.Kind == Exceeded:
		t.exceeded = &d
	case ad.Kind == Exceeded:
		t.exceeded = &ad
		return ad
	}
	return d
}

// measure reads the meter's live totals into a Usage.
func (t *Tracker) measure() Usage {
	rt := t.meter.Totals()
	u := Usage{
		Tokens:     rt.InputTokens + rt.OutputTokens + rt.CacheWriteTokens,
		CostSource: SourceUnknown,
	}
	if tc, ok := t.meter.(runners.TurnCounter); ok {
		u.Turns, _ = tc.LiveTurns()
	} else if rt.Turns != nil {
		u.Turns = *rt.Turns
	}
	used := rt.InputTokens+rt.OutputTokens+rt.CacheReadTokens+rt.CacheWriteTokens > 0
	switch {
	case rt.CostUSD != nil && (t.liveCost || rt.Finished):
		// The agent's own figure: per call for the live vocabularies, the whole run once a final result gave it.
		u.CostUSD, u.CostSource = *rt.CostUSD, SourceReported
	case t.cfg.Price != nil && used:
		u.CostUSD = t.cfg.Price.Cost(rt.InputTokens, rt.OutputTokens, rt.CacheReadTokens, rt.CacheWriteTokens)
		u.CostSource = SourceEstimated
	}
	return u
}

// larger is the usage judged against the caps: each figure the larger of the agent's and the proxy's, and a
// known cost over an unknown one.
func larger(agent Usage, proxy *ProxyUsage) Usage {
	if proxy == nil {
		return agent
	}
	u := agent
	u.Tokens = max(agent.Tokens, proxy.Tokens)
	u.Turns = max(agent.Turns, proxy.Calls)
	if proxy.CostSource != SourceUnknown && proxy.CostSource != "" && (agent.CostSource == SourceUnknown || proxy.CostUSD > agent.CostUSD) {
		u.CostUSD, u.CostSource = proxy.CostUSD, proxy.CostSource
	}
	return u
}

// check compares the usage with the caps: a crossed cap first, then warn_at.
func (t *Tracker) check() Decision {
	c := t.cfg.Caps
	type figure struct {
		name         string
		limit, value float64
		source       string
		agent, proxy float64
	}
	var p ProxyUsage
	if t.proxy != nil {
		p = *t.proxy
	}
	var figures []figure
	if c.MaxUSD > 0 && t.usage.CostSource != SourceUnknown {
		figures = append(figures, figure{CapMaxUSD, c.MaxUSD, t.usage.CostUSD, t.usage.CostSource, t.agent.CostUSD, p.CostUSD})
	}
	if c.MaxTokens > 0 {
		figures = append(figures, figure{CapMaxTokens, float64(c.MaxTokens), float64(t.usage.Tokens), "", float64(t.agent.Tokens), float64(p.Tokens)})
	}
	if c.MaxTurns > 0 {
		figures = append(figures, figure{CapMaxTurns, float64(c.MaxTurns), float64(t.usage.Turns), "", float64(t.agent.Turns), float64(p.Calls)})
	}
	for _, f := range figures {
		if f.value > f.limit {
			return Decision{Kind: Exceeded, Scope: ScopeNode, Cap: f.name, Limit: f.limit, Value: f.value, Source: f.source,
				Metered: t.proxy != nil, Agent: f.agent, Proxy: f.proxy, AgentUnknown: f.name == CapMaxUSD && t.agent.CostSource == SourceUnknown}
		}
	}
	if c.WarnAt > 0 && !t.warned {
		for _, f := range figures {
			if f.value >= c.WarnAt*f.limit {
				t.warned = true
				return Decision{Kind: Warn, Scope: ScopeNode, Cap: f.name, Limit: f.limit, Value: f.value, WarnAt: c.WarnAt, Source: f.source}
			}
		}
	}
	return Decision{}
}
