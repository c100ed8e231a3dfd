package executor

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kewplan/kewplan/budget"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/planner"
	"github.com/kewplan/kewplan/runners"
)

// Budgets, enforced from the live stream. Each node's stdout lines go through a budget.Tracker wrapped around the
// node's meter; the tracker decides, this file acts: on a warn_at crossing it raises a BudgetWarning, on a crossed
// cap it kills the container through the node's run context (the path the output budget and the disk watchdog
// use) and the node ends budget_exceeded. Every tracker adds to the apply's budget.Apply: once the apply-wide
// max_usd is crossed, nothing new starts, every running container is killed the same way, and the nodes not
// started are skipped with the reason.

// applyBudget is the apply-wide tracker and the signal that stops every node once its max_usd is crossed.
type applyBudget struct {
	tracker *budget.Apply
	stop    chan struct{} // closed once, when the apply-wide max_usd is crossed
	once    sync.Once
}

func newApplyBudget(p *planner.Plan) *applyBudget {
	ab := &applyBudget{stop: make(chan struct{})}
	maxUSD := 0.0
	if p.Budget != nil && p.Budget.MaxUSD != nil {
		maxUSD = *p.Budget.MaxUSD
	}
	// Called from the feeding goroutine of the node whose line crossed the cap: it only signals.
	ab.tracker = budget.NewApply(maxUSD, func(budget.Decision) { ab.once.Do(func() { close(ab.stop) }) })
	return ab
}

// exceeded is the decision that stopped the apply, if its max_usd was crossed.
func (ab *applyBudget) exceeded() (budget.Decision, bool) { return ab.tracker.Exceeded() }

// nodeCaps converts a node's effective caps (nil: none) to the tracker's, and its model's price.
func nodeCaps(nb *planner.NodeBudget) (budget.Caps, *runners.Price) {
	var c budget.Caps
	if nb == nil {
		return c, nil
	}
	if nb.MaxUSD != nil {
		c.MaxUSD = *nb.MaxUSD
	}
	if nb.MaxTokens != nil {
		c.MaxTokens = *nb.MaxTokens
	}
	if nb.MaxTurns != nil {
		c.MaxTurns = *nb.MaxTurns
	}
	if nb.WarnAt != nil {
		c.WarnAt = *nb.WarnAt
	}
	var price *runners.Price
	if nb.Price != nil {
		p := nb.Price.Price
		price = &p
	}
	return c, price
}

// nodeBudget follows one node's spend while its container runs.
type nodeBudget struct {
	tracker *budget.Tracker
	apply   *applyBudget
	kill    chan struct{} // closed once, when the node's own tracker says Exceeded
	once    sync.Once
	// killed is set when a budget (the node's or the apply's) killed the container; killedByApply when it was the
	// apply-wide stop.
	killed, killedByApply atomic.Bool
	// warning is the warn_at crossing, written on the feeding goroutine (or the proxy's) and read once the feed
	// is done.
	warnMu  sync.Mutex
	warning string
	// attempt is the attempt the budget follows; proxy sums that attempt's brokered requests.
	attempt int
	proxy   proxySums
}

// proxySums adds up what the egress proxy metered for one attempt, from its brokered requests.
type proxySums struct {
	mu                  sync.Mutex
	usage               budget.ProxyUsage
	costs, gaps, estimd bool
}

// brokered adds one brokered request's figures and hands the sums to the tracker, which judges them with the
// agent's own. Requests arrive in order, from the engine's reader of the proxy's decision log.
func (nb *nodeBudget) brokered(r ledger.BrokerRequest) {
	ps := &nb.proxy
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if r.ModelCall {
		ps.usage.Calls++
	}
	if r.Metered {
		tokens := r.InputTokens + r.OutputTokens + r.CacheWriteTokens
		ps.usage.Tokens += tokens
		switch {
		case r.CostUSD != nil:
			ps.usage.CostUSD += *r.CostUSD
			ps.costs = true
			ps.estimd = ps.estimd || r.CostSource == budget.SourceEstimated
		case tokens+r.CacheReadTokens > 0:
			ps.gaps = true // usage without a cost: the sum is a lower bound
		}
	}
	switch {
	case ps.gaps || !ps.costs:
		ps.usage.CostSource = budget.SourceUnknown
	case ps.estimd:
		ps.usage.CostSource = budget.SourceEstimated
	default:
		ps.usage.CostSource = budget.SourceProvider
	}
	nb.tracker.Proxy(ps.usage)
}

// finding says how the agent's meter and the proxy's differ beyond rounding, "" when they agree or the proxy
// metered nothing.
func (nb *nodeBudget) finding() string {
	agent, proxy, ok := nb.tracker.Meters()
	if !ok {
		return ""
	}
	// The same figures the ledger's finding is computed from (ledger.Meters): the agent's side is what it printed,
	// so its cost is its own reported figure or none, never kewplan's estimate from its tokens.
	side := func(tokens int64, cost float64, source string, known bool) ledger.MeterSide {
		s := ledger.MeterSide{Tokens: tokens, CostSource: source}
		if known {
			s.CostUSD = &cost
		}
		return s
	}
	return ledger.MeterFinding(side(agent.Tokens, agent.CostUSD, "", agent.CostSource == budget.SourceReported),
		side(proxy.Tokens, proxy.CostUSD, proxy.CostSource, proxy.CostSource != budget.SourceUnknown))
}

// newNodeBudget wraps the node's meter in its tracker. notify runs on the feeding goroutine: it records a warning
// and raises the hook event, or signals the kill; it never waits.
func (a *applier) newNodeBudget(np *planner.NodePlan, meter runners.Meter) *nodeBudget {
	caps, price := nodeCaps(np.Budget)
	nb := &nodeBudget{apply: a.budget, kill: make(chan struct{})}
	a.mu.Lock()
	nb.attempt = a.attempts[np.Name]
	if a.nodeBudgets == nil {
		a.nodeBudgets = map[string]*nodeBudget{}
	}
	a.nodeBudgets[np.Name] = nb
	a.mu.Unlock()
	nb.tracker = budget.NewTracker(meter, budget.NodeConfig{Node: np.Name, Protocol: np.Protocol, Caps: caps, Price: price, Apply: a.budget.tracker},
		func(d budget.Decision) {
			switch d.Kind {
			case budget.Warn:
				nb.warnMu.Lock()
				nb.warning = d.String()
				nb.warnMu.Unlock()
				a.hook.BudgetWarning(BudgetWarningEvent{RunID: a.runID, Node: np.Name, Scope: d.Scope, Cap: d.Cap, Limit: d.Limit,
					Value: d.Value, WarnAt: d.WarnAt, Source: d.Source, Message: d.String(), Time: time.Now()})
			case budget.Exceeded:
				nb.once.Do(func() { close(nb.kill) })
			}
		})
	return nb
}

// watch kills the container (through stop, which cancels its run context) when the node crosses a cap or the
// apply-wide stop fires, until ctx ends. The returned function waits for the watcher to be done.
func (nb *nodeBudget) watch(ctx context.Context, stop func()) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-nb.kill:
			nb.killed.Store(true)
			stop()
		case <-nb.apply.stop:
			nb.killedByApply.Store(true)
			nb.killed.Store(true)
			stop()
		case <-ctx.Done():
		}
	}()
	return func() { <-done }
}

// settle records the node's spend on its result once the feed is done, and returns the cap that stopped it: its
// tracker's decision (the node's cap, or the apply's crossed on one of its lines), or the apply-wide stop when that
// killed its container (the kill may land while the engine still starts it: then the run has an error, or exited
// by the signal). nil when no cap stopped it.
func (nb *nodeBudget) settle(res *ledger.NodeResult, killedByRun bool) *ledger.BudgetStop {
	u := nb.tracker.Usage()
	res.CostSource = u.CostSource
	res.CostUSD = nil
	if u.CostSource != budget.SourceUnknown {
		c := u.CostUSD
		res.CostUSD = &c
	}
	nb.warnMu.Lock()
	res.BudgetWarning = nb.warning
	nb.warnMu.Unlock()
	d, ok := nb.tracker.Exceeded()
	if !ok && nb.killedByApply.Load() && killedByRun {
		d, ok = nb.apply.exceeded()
	}
	if !ok {
		return nil
	}
	res.Budget = &ledger.BudgetStop{Scope: d.Scope, Cap: d.Cap, Limit: d.Limit, Value: d.Value, Source: d.Source, Message: d.String()}
	return res.Budget
}

// costTotal adds up the recorded costs of the nodes that ran: the sum of the known ones, where they came from, and
// which nodes' costs are estimates or unknown (then the sum is a lower bound).
func costTotal(nodes []ledger.NodeResult) (total *float64, source string, estimated, unknown []string) {
	estimated, unknown = []string{}, []string{}
	for i := range nodes {
		c, src := nodes[i].RecordedCost()
		switch src {
		case "":
			continue
		case ledger.CostEstimated:
			estimated = append(estimated, nodes[i].Node)
		case ledger.CostUnknown:
			unknown = append(unknown, nodes[i].Node)
		}
		if source == "" {
			source = ledger.CostReported
		}
		if c != nil {
			t := *c
			if total != nil {
				t += *total
			}
			total = &t
		}
	}
	sort.Strings(estimated)
	sort.Strings(unknown)
	switch {
	case len(unknown) > 0:
		source = ledger.CostUnknown
	case len(estimated) > 0:
		source = ledger.CostEstimated
	}
	return total, source, estimated, unknown
}

// applyStopReason is why a node was not started once the apply-wide max_usd was crossed.
func applyStopReason(d budget.Decision) string {
	return fmt.Sprintf("not started: %s", d.String())
}
