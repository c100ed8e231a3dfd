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
	var evaluated func(string) bool
	if !diags.HasErrors() {
		// Planning evaluates every instance of every node with the variables' values, which finds every error that
		// evaluating each node on its own finds (an unknown each or output only hides errors; see
		// config.Config.CheckValues), except for nodes planning does not evaluate (no instance) and, as a
		// precaution, nodes whose errors depend on values. So validate plans first and evaluates only those on
		// their own; when planning fails, every node is, so that an evaluation error is reported alone, before the
		// planner's rules, as the layers promise.
		p, planDiags := planner.Build(cfg, planner.Inputs{Vars: vals, FS: config.DirFS(cfg.Dir)})
		var only func(*config.Node) bool
		if !planDiags.HasErrors() {
			planned := p.PlannedBlocks()
			only = func(n *config.Node) bool { return !planned(n.Name) || n.ValueDependent() }
		}
		evalDiags := evaluateAll(cfg, vals, only)
		diags = append(diags, evalDiags...)
		if !evalDiags.HasErrors() {
			// Every node was evaluated with the variables' values, by planning or on its own: the load's deferred
			// check is left only what that cannot stand for, unless something failed.
			evaluated = func(string) bool { return true }
			diags = append(diags, planDiags...)
			if !diags.HasErrors() {
				// The engine's own checks: its block is there, and every node becomes a distinct Job.
				p.Diagnostics = diags
				_, _ = planEngine(&planned{cfg: cfg, plan: p}, c.Engine, false)
				diags = p.Diagnostics
			}
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
	diags = config.DedupeDiagnostics(diags)
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

// evaluateAll evaluates every node's attributes (those only selects, when not nil) and every runner's args once,
// with the resolved variables and unknown node outputs, to catch what only evaluation shows: a file() of a
// missing file, a wrong type from a variable, a function failing on its arguments.
func evaluateAll(cfg *config.Config, vals map[string]cty.Value, only func(*config.Node) bool) hcl.Diagnostics {
	ctx, diags := cfg.EvalContext(&config.Scope{Vars: vals, FS: config.DirFS(cfg.Dir)})
	// Nodes evaluate independently in the shared context: in parallel, diagnostics in name order.
	var names []string
	for name, n := range cfg.Nodes {
		if only == nil || only(n) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
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
