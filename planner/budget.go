package planner

import (
	"fmt"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/internal/money"
	"github.com/kewplan/kewplan/runners"
)

// Origins of a node's caps.
const (
	BudgetOriginNode    = "node"    // the node's own budget block (or its timeout attribute)
	BudgetOriginSandbox = "sandbox" // the sandbox's budget block, the default of every node
	BudgetOriginDefault = "default" // kewplan's default (the 60m timeout)
)

// NodeBudget is a node's effective caps: the sandbox's budget replaced attribute by attribute by the node's. A nil
// cap is no cap.
type NodeBudget struct {
	MaxUSD    *float64
	MaxTokens *int64 // input + output + cache writes
	MaxTurns  *int64
	WarnAt    *float64
	Timeout   time.Duration
	// Origins says where each cap came from, by attribute name (max_usd, max_tokens, max_turns, warn_at, timeout).
	// Nodes may share one map: never modify it.
	Origins map[string]string
	// CostSource is how the cost will be known while the node runs: "reported" (its runner reports cost live),
	// "estimated" (tokens × a known price) or "unknown".
	CostSource string
	// Price is the routed model's price; nil when it has none.
	Price *runners.PriceEntry
	// maxUSDRange and maxTurnsRange are where max_usd and max_turns were written, for diagnostics.
	maxUSDRange, maxTurnsRange hcl.Range
}

// ApplyBudget is the apply-wide view: the cap of the whole apply against the sum of the node caps.
type ApplyBudget struct {
	MaxUSD *float64 // the top-level budget's max_usd; nil when none
	// WorstCaseUSD is the sum of every node's max_usd; nil when a node has none (see Unbounded).
	WorstCaseUSD *float64
	// Unbounded lists the nodes without a cost cap, in plan order: with any, the worst case is unbounded.
	Unbounded []string
}

func init() { registerPlanCheck(planBudgets) }

// PriceTable is the built-in price table with the configuration's pricing blocks applied.
func PriceTable(cfg *config.Config) *runners.PriceTable {
	t := runners.BuiltinPriceTable()
	if cfg == nil {
		return t
	}
	for model, p := range cfg.Pricing {
		t.Override(model, runners.Price{Input: p.Input, Output: p.Output, CacheRead: p.CacheRead, CacheWrite: p.CacheWrite},
			fmt.Sprintf("%s:%d", p.DeclRange.Filename, p.DeclRange.Start.Line))
	}
	return t
}

// planBudgets sets every node's effective caps and the apply-wide worst case, and refuses a cost cap that could
// only be enforced with a price nobody knows (rule budget-unpriced).
func planBudgets(cfg *config.Config, _ Inputs, p *Plan) hcl.Diagnostics {
	prices := PriceTable(cfg)
	var diags hcl.Diagnostics
	ab := &ApplyBudget{}
	if cfg.Budget != nil {
		ab.MaxUSD = cfg.Budget.MaxUSD
	}
	worst := 0.0
	origins := map[bool]map[string]string{}
	priced := map[string]*runners.PriceEntry{} // by model: a plan has a few models and many nodes
	for _, np := range p.Nodes {
		n := cfg.Nodes[np.Block] // an instance's caps are its block's
		nb := effectiveBudget(cfg.Sandbox.Budget, n, np, origins)
		np.Budget = nb
		if nb.MaxUSD == nil {
			ab.Unbounded = append(ab.Unbounded, np.Name)
		} else {
			worst += *nb.MaxUSD
		}
		nb.CostSource = "unknown"
		modelKnown := np.Model != "" && !contains(np.Unknown, "model")
		if modelKnown {
			e, seen := priced[np.Model]
			if !seen {
				if found, ok := prices.Lookup(np.Model); ok {
					e = &found
				}
				priced[np.Model] = e // nodes of a model share its price entry
			}
			if e != nil {
				nb.Price = e
				nb.CostSource = "estimated"
			}
		}
		if runners.ReportsCostLive(np.Protocol) {
			nb.CostSource = "reported"
		}
		if nb.MaxTurns != nil && np.Protocol != "" && !runners.ReportsTurnsLive(np.Protocol) {
			diags = append(diags, NewDiagnostic(RuleBudgetTurnsUnseen, rangePtr(nb.maxTurnsRange),
				fmt.Sprintf("Node %q caps its turns at max_turns %d, but its runner %q does not report turns in its stream.", np.Name, *nb.MaxTurns, np.Runner)))
		}
		modelMissing := np.Model == "" && !contains(np.Unknown, "model") // model-not-routed says so
		if nb.MaxUSD == nil || np.Protocol == "" || nb.CostSource != "unknown" || modelMissing {
			continue
		}
		detail := fmt.Sprintf("Node %q caps its cost at max_usd %s, but its model %q has no price in the built-in table or a pricing block, and its runner %q reports cost only at the end of a run, if at all.",
			np.Name, money.Amount(*nb.MaxUSD), np.Model, np.Runner)
		if !modelKnown {
			detail = fmt.Sprintf("Node %q caps its cost at max_usd %s, but its model is known only after apply, so its price cannot be checked before the agent runs, and its runner %q reports cost only at the end of a run, if at all.",
				np.Name, money.Amount(*nb.MaxUSD), np.Runner)
		}
		diags = append(diags, NewDiagnostic(RuleBudgetUnpriced, rangePtr(nb.maxUSDRange), detail))
		np.Errors = true
		np.Container = nil
	}
	if len(ab.Unbounded) == 0 && len(p.Nodes) > 0 {
		ab.WorstCaseUSD = &worst
	}
	p.Budget = ab
	return diags
}

// effectiveBudget applies the node's budget block over the sandbox's, attribute by attribute. The Origins of
// nodes without a budget block differ only in where their timeout comes from, so such nodes share one map per
// case, kept in shared (by whether the node sets its timeout): a large plan holds two maps, not one per node.
// Origins maps are never modified once made.
func effectiveBudget(sandbox *config.Budget, n *config.Node, np *NodePlan, shared map[bool]map[string]string) *NodeBudget {
	nodeTimeout := n != nil && n.Timeout != nil
	var own *config.Budget
	if n != nil {
		own = n.Budget
	}
	nb := &NodeBudget{Timeout: np.Timeout}
	nb.Origins = shared[nodeTimeout]
	record := own != nil || nb.Origins == nil
	if record {
		nb.Origins = map[string]string{"timeout": BudgetOriginDefault}
		if nodeTimeout {
			nb.Origins["timeout"] = BudgetOriginNode
		}
	}
	apply := func(b *config.Budget, origin string) {
		if b == nil {
			return
		}
		set := func(name string) {
			if record {
				nb.Origins[name] = origin
			}
		}
		if b.MaxUSD != nil {
			nb.MaxUSD, nb.maxUSDRange = b.MaxUSD, b.MaxUSDRange
			set("max_usd")
		}
		if b.MaxTokens != nil {
			nb.MaxTokens = b.MaxTokens
			set("max_tokens")
		}
		if b.MaxTurns != nil {
			nb.MaxTurns, nb.maxTurnsRange = b.MaxTurns, b.MaxTurnsRange
			set("max_turns")
		}
		if b.WarnAt != nil {
			nb.WarnAt = b.WarnAt
			set("warn_at")
		}
	}
	apply(sandbox, BudgetOriginSandbox)
	apply(own, BudgetOriginNode)
	if own == nil {
		shared[nodeTimeout] = nb.Origins
	}
	return nb
}
