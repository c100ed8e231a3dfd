package jsonplan

import (
	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/planner"
	"github.com/kewplan/kewplan/runners"
)

// BudgetDocument is a node's caps in a Document, under the configuration's attribute names; null is no cap.
type BudgetDocument struct {
	MaxUSD    *float64 `json:"max_usd"`
	MaxTokens *int64   `json:"max_tokens"`
	MaxTurns  *int64   `json:"max_turns"`
	WarnAt    *float64 `json:"warn_at"`
	Timeout   string   `json:"timeout"`
	// Origins says where each cap came from: "node", "sandbox" or "default".
	Origins map[string]string `json:"origins"`
	// CostSource is how the cost will be known while the node runs: "reported", "estimated" or "unknown".
	CostSource string `json:"cost_source"`
	// Price is the model's price per million tokens and its origin; null when it has none.
	Price *runners.PriceEntry `json:"price"`
}

// ApplyBudgetDocument is the apply-wide budget in a Document.
type ApplyBudgetDocument struct {
	MaxUSD *float64 `json:"max_usd"`
	// WorstCaseUSD is the sum of the node caps; null when a node has none (then it is unbounded).
	WorstCaseUSD *float64 `json:"worst_case_usd"`
	// Unbounded lists the nodes without a max_usd.
	Unbounded []string `json:"unbounded"`
}

func newBudgetDocument(nb *planner.NodeBudget) *BudgetDocument {
	if nb == nil {
		return nil
	}
	// Origins maps are never modified (see NodeBudget), so the document shares the plan's.
	d := &BudgetDocument{MaxUSD: nb.MaxUSD, MaxTokens: nb.MaxTokens, MaxTurns: nb.MaxTurns, WarnAt: nb.WarnAt,
		Timeout: config.FormatDuration(nb.Timeout), Origins: nb.Origins, CostSource: nb.CostSource, Price: nb.Price}
	if d.Origins == nil {
		d.Origins = map[string]string{}
	}
	return d
}

func newApplyBudgetDocument(ab *planner.ApplyBudget) *ApplyBudgetDocument {
	if ab == nil {
		return nil
	}
	return &ApplyBudgetDocument{MaxUSD: ab.MaxUSD, WorstCaseUSD: ab.WorstCaseUSD, Unbounded: nonNil(ab.Unbounded)}
}
