package plandiff

import (
	"fmt"
	"strconv"
	"time"

	"github.com/kewplan/kewplan/jsonplan"
)

// Finding kinds of budget changes: raising or removing a cap lets an agent spend more, so it is widening.
const (
	KindBudgetRaised  = "widening-budget"
	KindBudgetLowered = "narrowing-budget"
)

// capFigure is one cap of a node as the diff compares it: absent (no cap) is infinitely high.
type capFigure struct {
	name    string
	present bool
	value   float64
	text    string
}

func nodeCaps(b *jsonplan.BudgetDocument) []capFigure {
	usd := capFigure{name: "max_usd"}
	if b.MaxUSD != nil {
		usd = capFigure{"max_usd", true, *b.MaxUSD, strconv.FormatFloat(*b.MaxUSD, 'f', -1, 64)}
	}
	tokens := capFigure{name: "max_tokens"}
	if b.MaxTokens != nil {
		tokens = capFigure{"max_tokens", true, float64(*b.MaxTokens), strconv.FormatInt(*b.MaxTokens, 10)}
	}
	turns := capFigure{name: "max_turns"}
	if b.MaxTurns != nil {
		turns = capFigure{"max_turns", true, float64(*b.MaxTurns), strconv.FormatInt(*b.MaxTurns, 10)}
	}
	timeout := capFigure{name: "timeout"}
	if d, err := time.ParseDuration(b.Timeout); err == nil {
		timeout = capFigure{"timeout", true, float64(d), b.Timeout}
	}
	return []capFigure{usd, tokens, turns, timeout}
}

// compareCap judges one cap change; where says whose cap it is ("node \"fix\"", "the apply").
func compareCap(b, h capFigure, where string) (widening bool, message string, changed bool) {
	label := b.name + " cap" // "the timeout" is a cap already
	if b.name == "timeout" {
		label = b.name
	}
	switch {
	case b.present == h.present && (!b.present || b.value == h.value):
		return false, "", false
	case b.present && !h.present:
		return true, fmt.Sprintf("The %s of %s was removed (it was %s): nothing caps it now.", label, where, b.text), true
	case !b.present && h.present:
		return false, fmt.Sprintf("%s gained a %s cap of %s.", capitalise(where), b.name, h.text), true
	case h.value > b.value:
		return true, fmt.Sprintf("The %s of %s was raised from %s to %s.", label, where, b.text, h.text), true
	}
	return false, fmt.Sprintf("The %s of %s was lowered from %s to %s.", label, where, b.text, h.text), true
}

func capitalise(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

// compareBudget lists a node's cap changes as field changes and findings. A side without a recorded budget (a plan
// written before budgets existed) cannot be compared.
func compareBudget(b, h *jsonplan.NodeDocument) ([]FieldChange, []Finding) {
	if b.Budget == nil || h.Budget == nil {
		return nil, nil
	}
	var fields []FieldChange
	var findings []Finding
	bc, hc := nodeCaps(b.Budget), nodeCaps(h.Budget)
	where := fmt.Sprintf("node %q", h.Name)
	for i := range bc {
		widening, msg, changed := compareCap(bc[i], hc[i], where)
		if !changed {
			continue
		}
		fields = append(fields, FieldChange{Field: bc[i].name, Base: capText(bc[i]), Head: capText(hc[i])})
		kind := KindBudgetLowered
		if widening {
			kind = KindBudgetRaised
		}
		findings = append(findings, Finding{Kind: kind, Widening: widening, Node: h.Name, Range: nodeRange(h), Message: msg})
	}
	bw, hw := floatText(b.Budget.WarnAt), floatText(h.Budget.WarnAt)
	if bw != hw {
		fields = append(fields, FieldChange{Field: "warn_at", Base: bw, Head: hw})
	}
	if b.Budget.CostSource != h.Budget.CostSource {
		fields = append(fields, FieldChange{Field: "cost source", Base: b.Budget.CostSource, Head: h.Budget.CostSource})
	}
	return fields, findings
}

// compareApplyBudget judges the apply-wide max_usd. Its findings name no node.
func compareApplyBudget(base, head *jsonplan.Document) []Finding {
	if base.Budget == nil || head.Budget == nil {
		return nil
	}
	fig := func(v *float64) capFigure {
		if v == nil {
			return capFigure{name: "max_usd"}
		}
		return capFigure{"max_usd", true, *v, strconv.FormatFloat(*v, 'f', -1, 64)}
	}
	widening, msg, changed := compareCap(fig(base.Budget.MaxUSD), fig(head.Budget.MaxUSD), "the whole apply")
	if !changed {
		return nil
	}
	kind := KindBudgetLowered
	if widening {
		kind = KindBudgetRaised
	}
	return []Finding{{Kind: kind, Widening: widening, Message: msg}}
}

func capText(c capFigure) string {
	if !c.present {
		return "(none)"
	}
	return c.text
}

func floatText(v *float64) string {
	if v == nil {
		return "(none)"
	}
	return strconv.FormatFloat(*v, 'f', -1, 64)
}
