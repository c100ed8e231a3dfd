package views

import (
	"io"

	"github.com/hashicorp/hcl/v2"

	"github.com/kewplan/kewplan/internal/jsonstream"
	"github.com/kewplan/kewplan/runners"
)

// Pricing is the view of `kewplan pricing`: the price table in force, built-in prices and a configuration's
// pricing blocks.
type Pricing interface {
	Diagnostics(diags hcl.Diagnostics, files ...map[string][]byte)
	Pricing(doc *PricingJSON) error
}

// NewPricing returns pricing's view: a table, or JSON.
func NewPricing(vt ViewType, s Streams) Pricing { return &pricingView{NewView(s), vt} }

type pricingView struct {
	*View
	vt ViewType
}

func (v *pricingView) Pricing(doc *PricingJSON) error {
	if v.vt == viewJSON {
		return jsonstream.Indented(v.streams.Stdout, doc)
	}
	return writePricingHuman(v.streams.Stdout, doc)
}

// PricingJSON is `kewplan pricing --json`: USD per million tokens, by model.
type PricingJSON struct {
	// AsOf is the date the built-in table was last checked; Sources are where its prices come from.
	AsOf    string   `json:"as_of"`
	Sources []string `json:"sources"`
	// Models lists every priced model, sorted; origin is "builtin" or the pricing block's "file:line".
	Models []runners.PriceEntry `json:"models"`
	// LiveCostProtocols are the stdout vocabularies that report the agent's cost per model call: a node on one of
	// them may cap its cost without a price.
	LiveCostProtocols []string `json:"live_cost_protocols"`
}

// NewPricingJSON describes a price table.
func NewPricingJSON(t *runners.PriceTable) *PricingJSON {
	doc := &PricingJSON{AsOf: runners.PricesAsOf, Sources: append([]string{}, runners.PriceSources...), Models: t.Entries(),
		LiveCostProtocols: []string{}}
	for _, p := range append(runners.Protocols(), "lemonade") {
		if runners.ReportsCostLive(p) {
			doc.LiveCostProtocols = append(doc.LiveCostProtocols, p)
		}
	}
	return doc
}

// writePricingHuman writes the table: model, the four prices, and where each row comes from.
func writePricingHuman(w io.Writer, doc *PricingJSON) error {
	pw := &planWriter{w: w}
	pw.printf("Prices in USD per million tokens (built-in table as of %s).\n\n", doc.AsOf)
	rows := [][]string{{"MODEL", "INPUT", "OUTPUT", "CACHE READ", "CACHE WRITE", "ORIGIN"}}
	for _, e := range doc.Models {
		rows = append(rows, []string{diffSafe(e.Model), num(e.Price.Input), num(e.Price.Output), num(e.Price.CacheRead),
			num(e.Price.CacheWrite), diffSafe(e.Origin)})
	}
	writeRunnersTable(pw, rows)
	pw.printf("\nA pricing \"MODEL\" block in the configuration overrides a row or adds one. Runners whose stream reports\n")
	pw.printf("the agent's own cost live (protocols %s) need no price for a max_usd.\n", joinList(doc.LiveCostProtocols))
	pw.printf("\nSources:\n")
	for _, s := range doc.Sources {
		pw.printf("  %s\n", s)
	}
	return pw.err
}

func joinList(s []string) string {
	out := ""
	for i, x := range s {
		switch {
		case i == 0:
		case i == len(s)-1:
			out += " and "
		default:
			out += ", "
		}
		out += x
	}
	return out
}
