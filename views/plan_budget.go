package views

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kewplan/kewplan/internal/money"
	"github.com/kewplan/kewplan/jsonplan"
)

// budgetCaps renders a node's caps with their origins: "max_usd 1.50 (node), max_turns 200 (sandbox), timeout
// 45m (default)". A document written before budgets existed has none: "(not recorded)".
func budgetCaps(b *jsonplan.BudgetDocument) string {
	if b == nil {
		return "(not recorded)"
	}
	var parts []string
	add := func(name, value string) {
		s := name + " " + value
		if o := b.Origins[name]; o != "" {
			s += " (" + o + ")"
		}
		parts = append(parts, s)
	}
	if b.MaxUSD != nil {
		add("max_usd", money.Amount(*b.MaxUSD))
	}
	if b.MaxTokens != nil {
		add("max_tokens", strconv.FormatInt(*b.MaxTokens, 10))
	}
	if b.MaxTurns != nil {
		add("max_turns", strconv.FormatInt(*b.MaxTurns, 10))
	}
	add("timeout", b.Timeout)
	if b.WarnAt != nil {
		add("warn_at", strconv.FormatFloat(*b.WarnAt, 'f', -1, 64))
	}
	return strings.Join(parts, ", ")
}

// budgetCost says how a node's cost will be known while it runs.
func budgetCost(b *jsonplan.BudgetDocument) string {
	if b == nil {
		return "(not recorded)"
	}
	switch b.CostSource {
	case "reported":
		return "reported live by the agent"
	case "estimated":
		if b.Price != nil {
			p := b.Price.Price
			return fmt.Sprintf("estimated: tokens × the price of %s from %s (USD per million tokens: input %s, output %s, cache read %s, cache write %s)",
				diffSafe(b.Price.Model), diffSafe(priceOrigin(b.Price.Origin)), num(p.Input), num(p.Output), num(p.CacheRead), num(p.CacheWrite))
		}
		return "estimated: tokens × price"
	}
	return "unknown: the model has no price and the agent reports no live cost"
}

func priceOrigin(o string) string {
	if o == "builtin" || o == "" {
		return "the built-in table"
	}
	return "the pricing block at " + o
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// budgetWorstCase renders the apply-wide worst case: the sum of the node caps, or unbounded with the nodes that
// have no cost cap.
func budgetWorstCase(ab *jsonplan.ApplyBudgetDocument) string {
	switch {
	case ab == nil:
		return "(not recorded)"
	case ab.WorstCaseUSD != nil:
		return money.Amount(*ab.WorstCaseUSD) + " USD (the sum of the node caps)"
	case len(ab.Unbounded) == 0:
		return "(no nodes)"
	}
	return fmt.Sprintf("unbounded: %s no max_usd (%s)", pick(len(ab.Unbounded) == 1, "1 node has", fmt.Sprintf("%d nodes have", len(ab.Unbounded))),
		strings.Join(ab.Unbounded, ", "))
}

// budgetApplyCap renders the apply-wide cap against the worst case.
func budgetApplyCap(ab *jsonplan.ApplyBudgetDocument) string {
	switch {
	case ab == nil:
		return "(not recorded)"
	case ab.MaxUSD == nil:
		return "none (no top-level budget block)"
	case ab.WorstCaseUSD != nil && *ab.WorstCaseUSD <= *ab.MaxUSD:
		return "max_usd " + money.Amount(*ab.MaxUSD) + ", above the worst case"
	}
	return "max_usd " + money.Amount(*ab.MaxUSD) + ": the apply stops starting and stops running nodes when the total crosses it"
}

func pick(cond bool, a, b string) string {
	if cond {
		return a
	}
	return b
}

// writeBudgetHuman writes the plan's Budget section.
func writeBudgetHuman(ew *planWriter, doc *jsonplan.Document) {
	if len(doc.Nodes) == 0 {
		return
	}
	ew.printf("\nBudget\n")
	ew.printf("  %-12s %s\n", "worst case", budgetWorstCase(doc.Budget))
	ew.printf("  %-12s %s\n", "apply cap", budgetApplyCap(doc.Budget))
}

// writeBudgetMarkdown writes the plan's Budget section: the apply-wide figures, then one row per node.
func writeBudgetMarkdown(ew *planWriter, doc *jsonplan.Document) {
	if len(doc.Nodes) == 0 {
		return
	}
	ew.printf("\n### Budget\n\n- Worst case: %s\n- Apply cap: %s\n", mdText(budgetWorstCase(doc.Budget)), mdText(budgetApplyCap(doc.Budget)))
	ew.printf("\n| Node | Caps | Cost |\n|---|---|---|\n")
	for i := range doc.Nodes {
		n := &doc.Nodes[i]
		cost := "(not recorded)"
		if n.Budget != nil {
			cost = n.Budget.CostSource
		}
		ew.printf("| %s | %s | %s |\n", mdCode(n.Name), mdText(budgetCaps(n.Budget)), mdText(cost))
	}
}
