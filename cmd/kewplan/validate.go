package main

import (
	"maps"
	"slices"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/internal/parallel"
	"github.com/kewplan/kewplan/planner"
	"github.com/kewplan/kewplan/views"
)

// ValidateCmd is `kewplan validate [PATH] [--json] [--var …] [--var-file …]`.
type ValidateCmd struct {
	Path     string `arg:"" optional:"" default:"." help:"A .hcl file, or a directory whose *.hcl files (not recursive) form the configuration."`
	JSON     bool   `name:"json" help:"Print the result as JSON, in the shape of terraform validate -json."`
	Engine   string `name:"engine" placeholder:"ENGINE" help:"Also check the configuration for this engine: docker or kubernetes (default: the configuration's only engine block, else docker)."`
	VarFlags `embed:""`
}

// Help shows an example.
func (ValidateCmd) Help() string {
	return "Example:\n  kewplan validate examples/review-pipeline.hcl --var model=claude-sonnet-4-5\n\n" +
		"Exit status 0 when the configuration is valid (warnings allowed), 1 when it has errors."
}

// Run checks the configuration in layers, each only when the previous one found no error, so that a mistake
// is reported once, where it was made: syntax and schema, references and literal values, variables, every
// node's evaluated attributes (function calls such as file()), then the planner's fail-closed rules.
func (c *ValidateCmd) Run(env *Env) error {
	l := loadToPlan(env, c.Path, c.VarFlags)
	cfg, vals, diags := l.cfg, l.vals, l.diags
	if !diags.HasErrors() {
		diags = append(diags, evaluateAll(cfg, vals)...)
	}
	// evaluateAll evaluated every node, with the variables' values: the load's deferred check is left only what
	// that cannot stand for, unless something failed.
	var evaluated func(string) bool
	if !diags.HasErrors() {
		evaluated = func(string) bool { return true }
	}
	if !diags.HasErrors() {
		p, d := planner.Build(cfg, planner.Inputs{Vars: vals, FS: config.DirFS(cfg.Dir)})
		diags = append(diags, d...)
		if !diags.HasErrors() {
			// The engine's own checks: its block is there, and every node becomes a distinct Job.
			p.Diagnostics = diags
			_, _ = planEngine(&planned{cfg: cfg, plan: p}, c.Engine, false)
			diags = p.Diagnostics
		}
	}
	if diags.HasErrors() {
		evaluated = nil
	}
	if d, ok := l.finishLoad(evaluated); ok {
		diags = append(diags, d...)
	} else {
		diags = d
	}
	diags = dedupeDiagnostics(diags)
	config.SortDiagnostics(diags)

	valid, err := views.NewValidate(views.ViewTypeOf(c.JSON), env.streams()).Results(diags, configSources(cfg)...)
	if err != nil {
		return err
	}
	if !valid {
		return ExitCode(1)
	}
	return nil
}

// evaluateAll evaluates every node's attributes and every runner's args once, with the resolved variables and
// unknown node outputs, to catch what only evaluation shows: a file() of a missing file, a wrong type from a
// variable, a function failing on its arguments.
func evaluateAll(cfg *config.Config, vals map[string]cty.Value) hcl.Diagnostics {
	ctx, diags := cfg.EvalContext(&config.Scope{Vars: vals, FS: config.DirFS(cfg.Dir)})
	// Nodes evaluate independently in the shared context: in parallel, diagnostics in name order.
	names := slices.Sorted(maps.Keys(cfg.Nodes))
	perNode := make([]hcl.Diagnostics, len(names))
	parallel.For(len(names), func(i int) { _, perNode[i] = config.EvalNode(cfg.Nodes[names[i]], ctx) })
	for _, d := range perNode {
		diags = append(diags, d...)
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Runners)) {
		_, d := config.EvalRunnerArgs(cfg.Runners[name], ctx, "model")
		diags = append(diags, d...)
	}
	return diags
}
