package config

import (
	"fmt"
	"math/big"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// Budget is a `budget` block inside the sandbox (the default of every node) or a node (replacing the sandbox
// default attribute by attribute). A nil field was not written. Values are literals, decided when the
// configuration loads, so that the plan a reviewer approves states every cap.
type Budget struct {
	MaxUSD         *float64
	MaxUSDRange    hcl.Range
	MaxTokens      *int64 // input + output + cache writes
	MaxTokensRange hcl.Range
	MaxTurns       *int64
	MaxTurnsRange  hcl.Range
	WarnAt         *float64 // a fraction of each cap, in (0, 1)
	WarnAtRange    hcl.Range
	DeclRange      hcl.Range
}

// ApplyBudget is the top-level `budget` block: the cap of the whole apply.
type ApplyBudget struct {
	MaxUSD      *float64
	MaxUSDRange hcl.Range
	DeclRange   hcl.Range
}

// Pricing is a `pricing "MODEL"` block: USD per million tokens, overriding the built-in price table for that
// model. CacheRead and CacheWrite default to Input when not written: charging a cached token like a fresh one
// over-estimates, which is the safe side of a cap.
type Pricing struct {
	Model      string
	Input      float64
	Output     float64
	CacheRead  float64
	CacheWrite float64
	DeclRange  hcl.Range
}

var budgetSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "max_usd"},
		{Name: "max_tokens"},
		{Name: "max_turns"},
		{Name: "warn_at"},
	},
}

var applyBudgetSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "max_usd"},
	},
}

var pricingSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "input", Required: true},
		{Name: "output", Required: true},
		{Name: "cache_read"},
		{Name: "cache_write"},
	},
}

// decodeBudgetBlock reads a sandbox's or a node's budget block; where names its owner ("the sandbox", `node "fix"`).
func decodeBudgetBlock(block *hcl.Block, where string) (*Budget, hcl.Diagnostics) {
	b := &Budget{DeclRange: block.DefRange}
	what := "the budget block of " + where
	content, diags := bodyContent(block.Body, budgetSchema, what)
	if attr, ok := content.Attributes["max_usd"]; ok {
		v, d := positiveNumber(attr, what, "an amount in US dollars, such as 1.5")
		diags = append(diags, d...)
		if !d.HasErrors() {
			b.MaxUSD, b.MaxUSDRange = &v, attr.Expr.Range()
		}
	}
	if attr, ok := content.Attributes["max_tokens"]; ok {
		n, d := positiveWholeNumber(attr, what, "a number of tokens (input + output + cache writes), such as 2000000")
		diags = append(diags, d...)
		if !d.HasErrors() {
			b.MaxTokens, b.MaxTokensRange = &n, attr.Expr.Range()
		}
	}
	if attr, ok := content.Attributes["max_turns"]; ok {
		n, d := positiveWholeNumber(attr, what, "a number of model turns, such as 200")
		diags = append(diags, d...)
		if !d.HasErrors() {
			b.MaxTurns, b.MaxTurnsRange = &n, attr.Expr.Range()
		}
	}
	if attr, ok := content.Attributes["warn_at"]; ok {
		v, d := constNumber(attr, what)
		diags = append(diags, d...)
		if !d.HasErrors() {
			if v <= 0 || v >= 1 {
				diags = append(diags, errorDiag("Invalid warn_at",
					fmt.Sprintf("The warn_at of %s is %s, which is not a fraction between 0 and 1. It is the share of each cap at which kewplan warns, so that 0.8 warns at 80%%; write a number above 0 and below 1.", what, formatNumber(v)),
					attr.Expr.Range()))
			} else {
				b.WarnAt, b.WarnAtRange = &v, attr.Expr.Range()
			}
		}
	}
	return b, diags
}

func decodeApplyBudgetBlock(block *hcl.Block) (*ApplyBudget, hcl.Diagnostics) {
	b := &ApplyBudget{DeclRange: block.DefRange}
	const what = "the top-level budget block"
	content, diags := bodyContent(block.Body, applyBudgetSchema, what)
	if attr, ok := content.Attributes["max_usd"]; ok {
		v, d := positiveNumber(attr, what, "an amount in US dollars for the whole apply, such as 20")
		diags = append(diags, d...)
		if !d.HasErrors() {
			b.MaxUSD, b.MaxUSDRange = &v, attr.Expr.Range()
		}
	}
	return b, diags
}

func decodePricingBlock(block *hcl.Block) (*Pricing, hcl.Diagnostics) {
	model := block.Labels[0]
	where := fmt.Sprintf("pricing %q", model)
	if model == "" {
		return nil, hcl.Diagnostics{errorDiag("Invalid pricing model",
			"The pricing block names no model. Write the model id as the node routes it, for example pricing \"claude-sonnet-4-5\" { ... }.",
			block.LabelRanges[0])}
	}
	p := &Pricing{Model: model, DeclRange: block.DefRange}
	content, diags := bodyContent(block.Body, pricingSchema, where)
	price := func(name string, dst *float64) bool {
		attr, ok := content.Attributes[name]
		if !ok {
			return false
		}
		v, d := constNumber(attr, where)
		diags = append(diags, d...)
		if d.HasErrors() {
			return true
		}
		if v < 0 {
			diags = append(diags, errorDiag("Invalid price",
				fmt.Sprintf("The %s price of %s is %s. A price is USD per million tokens and cannot be negative; write 0 for a model that costs nothing.", name, where, formatNumber(v)),
				attr.Expr.Range()))
			return true
		}
		*dst = v
		return true
	}
	price("input", &p.Input)
	price("output", &p.Output)
	if !price("cache_read", &p.CacheRead) {
		p.CacheRead = p.Input
	}
	if !price("cache_write", &p.CacheWrite) {
		p.CacheWrite = p.Input
	}
	if diags.HasErrors() {
		return nil, diags
	}
	return p, diags
}

// constNumber decodes a literal number.
func constNumber(attr *hcl.Attribute, where string) (float64, hcl.Diagnostics) {
	v, diags := constValue(attr, where)
	if diags.HasErrors() {
		return 0, diags
	}
	nv, err := convert.Convert(v, cty.Number)
	if err != nil || nv.IsNull() || !nv.IsKnown() {
		return 0, hcl.Diagnostics{wrongTypeDiag(attr, where, "a number", v.Type())}
	}
	f, _ := nv.AsBigFloat().Float64()
	return f, nil
}

// positiveNumber decodes a literal number above zero; want describes it for the fix hint.
func positiveNumber(attr *hcl.Attribute, where, want string) (float64, hcl.Diagnostics) {
	v, diags := constNumber(attr, where)
	if diags.HasErrors() {
		return 0, diags
	}
	if v <= 0 {
		return 0, hcl.Diagnostics{errorDiag(fmt.Sprintf("Invalid %s", attr.Name),
			fmt.Sprintf("The %s of %s is %s. A cap must be above zero: a cap of zero or less would stop every run before it starts. Write %s, or remove the argument to leave it uncapped.", attr.Name, where, formatNumber(v), want),
			attr.Expr.Range())}
	}
	return v, nil
}

// positiveWholeNumber decodes a literal whole number above zero.
func positiveWholeNumber(attr *hcl.Attribute, where, want string) (int64, hcl.Diagnostics) {
	n, diags := constWholeNumber(attr, where)
	if diags.HasErrors() {
		return 0, diags
	}
	if n <= 0 {
		return 0, hcl.Diagnostics{errorDiag(fmt.Sprintf("Invalid %s", attr.Name),
			fmt.Sprintf("The %s of %s is %d. A cap must be above zero: a cap of zero or less would stop every run before it starts. Write %s, or remove the argument to leave it uncapped.", attr.Name, where, n, want),
			attr.Expr.Range())}
	}
	return n, nil
}

func formatNumber(v float64) string { return big.NewFloat(v).Text('g', 10) }

// decodeBudgetBlocks decodes the budget block among blocks into *dst, refusing a second one.
func decodeBudgetBlocks(blocks hcl.Blocks, where string, dst **Budget) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, block := range blocks {
		if block.Type != "budget" {
			continue
		}
		if *dst != nil {
			diags = append(diags, errorDiag("Duplicate budget block",
				fmt.Sprintf("%s already has a budget block at %s. Write one budget block; merge the two.", capitalise(where), rangeString((*dst).DeclRange)),
				block.DefRange))
			continue
		}
		b, d := decodeBudgetBlock(block, where)
		diags = append(diags, d...)
		*dst = b
	}
	return diags
}

func capitalise(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
