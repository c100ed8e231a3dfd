package main

import (
	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/planner"
	"github.com/kewplan/kewplan/views"
)

// PricingCmd is `kewplan pricing [PATH] [--json]`.
type PricingCmd struct {
	Path string `arg:"" optional:"" help:"A .hcl file, or a directory whose *.hcl files form the configuration: its pricing blocks override the built-in prices."`
	JSON bool   `name:"json" help:"Print the price table as JSON."`
}

// Help shows an example.
func (PricingCmd) Help() string {
	return "Example:\n  kewplan pricing examples/quickstart.hcl\n\n" +
		"Without a configuration it lists the built-in prices (USD per million tokens) that estimate a node's cost\n" +
		"from its tokens when its agent does not report cost live. A pricing block shows where it was declared."
}

// Run prints the price table in force.
func (c *PricingCmd) Run(env *Env) error {
	view := views.NewPricing(views.ViewTypeOf(c.JSON), env.streams())
	var cfg *config.Config
	if c.Path != "" {
		loaded, diags := config.Load(c.Path)
		if diags.HasErrors() {
			view.Diagnostics(diags, configSources(loaded)...)
			return ExitCode(1)
		}
		cfg = loaded
	}
	return view.Pricing(views.NewPricingJSON(planner.PriceTable(cfg)))
}
