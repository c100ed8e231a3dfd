package main

import (
	"github.com/hashicorp/hcl/v2"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/planner"
	"github.com/kewplan/kewplan/views"
)

// GraphCmd is `kewplan graph [PATH] [--target NODE]… [--var …] [--var-file …]`.
type GraphCmd struct {
	Path     string   `arg:"" optional:"" default:"." help:"A .hcl file, or a directory whose *.hcl files (not recursive) form the configuration."`
	Targets  []string `name:"target" sep:"none" placeholder:"NODE" help:"Draw only NODE, or one instance such as 'fix[\"web\"]', and everything it depends on (repeatable)."`
	VarFlags `embed:""`
}

// Help shows an example.
func (GraphCmd) Help() string {
	return "Example:\n  kewplan graph examples/review-pipeline.hcl | dot -Tsvg > graph.svg\n\n" +
		"Edges run from a dependency to the node that waits for it. Nodes the plan refuses are drawn in red; the\n" +
		"errors go to stderr and the exit status is 1."
}

// Run plans the configuration and prints its graph as Graphviz DOT.
func (c *GraphCmd) Run(env *Env) error {
	view := views.NewGraph(env.streams())
	cfg, vals, diags := loadConfig(env, c.Path, c.VarFlags)
	if diags.HasErrors() {
		view.Diagnostics(diags, configSources(cfg)...)
		return ExitCode(1)
	}
	p, planDiags := planner.Build(cfg, planner.Inputs{Vars: vals, FS: config.DirFS(cfg.Dir), Targets: c.Targets})
	if err := view.Graph(jsonplan.NewDocument(p, version)); err != nil {
		return err
	}
	if planDiags.HasErrors() {
		view.Diagnostics(graphErrors(planDiags), configSources(cfg)...)
		return ExitCode(1)
	}
	return nil
}

// graphErrors keeps the errors: the graph is about structure, and kewplan plan shows the warnings.
func graphErrors(diags hcl.Diagnostics) hcl.Diagnostics {
	var out hcl.Diagnostics
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			out = append(out, d)
		}
	}
	return out
}
