package main

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/views"
)

// VarFlags are the variable options shared by every command that reads a configuration. Embed it with
// `embed:""`. Values are never split on commas: --var 'tags=["a","b"]' is one value.
type VarFlags struct {
	Vars     []string `name:"var" sep:"none" placeholder:"NAME=VALUE" help:"Set a variable (repeatable). Highest precedence."`
	VarFiles []string `name:"var-file" sep:"none" placeholder:"FILE" help:"Read variable values from an .hcl file of name = value lines (repeatable; later files win)."`
}

// loadConfig loads the configuration at path and resolves its variables from the environment (KEWPLAN_VAR_*),
// --var-file and --var, in Terraform's precedence. cfg is never nil, so diagnostics can always be printed
// with their sources. Variables are resolved only when the configuration loaded cleanly.
func loadConfig(env *Env, path string, vf VarFlags) (*config.Config, map[string]cty.Value, hcl.Diagnostics) {
	if path == "" {
		path = "."
	}
	cfg, diags := config.Load(path)
	if diags.HasErrors() {
		return cfg, nil, diags
	}
	vals, d := cfg.ResolveVariables(config.VariableInputs{Env: env.Environ, VarFiles: vf.VarFiles, Vars: vf.Vars})
	diags = append(diags, d...)
	return cfg, vals, diags
}

// loadedToPlan is a configuration loaded by loadToPlan, whose load-time value check is still to be finished.
type loadedToPlan struct {
	cfg   *config.Config
	vals  map[string]cty.Value
	load  hcl.Diagnostics // the load's own, before the variables'
	diags hcl.Diagnostics // the load's and the variables'
	// deferred is true until the value check config.LoadForPlanning left out has been made.
	deferred bool
}

// loadToPlan is loadConfig for a command that plans the configuration next: it loads with
// config.LoadForPlanning, so that a large configuration's node attributes are evaluated once, by the planner,
// rather than first with every variable unknown as well. The command must then call finishLoad.
func loadToPlan(env *Env, path string, vf VarFlags) *loadedToPlan {
	if path == "" {
		path = "."
	}
	cfg, diags := config.LoadForPlanning(path)
	l := &loadedToPlan{cfg: cfg, load: diags, diags: diags, deferred: !diags.HasErrors()}
	if !diags.HasErrors() {
		var d hcl.Diagnostics
		l.vals, d = cfg.ResolveVariables(config.VariableInputs{Env: env.Environ, VarFiles: vf.VarFiles, Vars: vf.Vars})
		l.diags = append(l.diags, d...)
	}
	return l
}

// finishLoad makes the value check the load deferred (config.Config.CheckValues, with evaluated reporting the
// nodes the command evaluated without error; nil after a failure) and, when it fails, returns ok false and
// config.Load's diagnostics: the command shows those alone, as it did when the load itself failed, whatever
// failed later. Otherwise it returns the check's other diagnostics, if any, for the command to add to its own.
func (l *loadedToPlan) finishLoad(evaluated func(node string) bool) (hcl.Diagnostics, bool) {
	if !l.deferred {
		return nil, true
	}
	l.deferred = false
	d := l.cfg.CheckValues(evaluated)
	if d.HasErrors() && evaluated != nil {
		d = l.cfg.CheckValues(nil) // every node's, as config.Load reports them
	}
	if !d.HasErrors() {
		return d, true
	}
	all := append(append(hcl.Diagnostics{}, l.load...), d...)
	config.SortDiagnostics(all)
	return all, false
}

// configSources returns the sources diagnostics of cfg may point into: the configuration and its variable files.
func configSources(cfg *config.Config) []map[string][]byte {
	if cfg == nil {
		return nil
	}
	return []map[string][]byte{cfg.Files, cfg.VarFiles}
}

// streams are what the views write to: the command's streams, colour only on a terminal without --no-color.
// Commands never write to them themselves; they hand them to their view.
func (env *Env) streams() views.Streams {
	return views.Streams{Stdout: env.Stdout, Stderr: env.Stderr, Color: env.Terminal && !env.NoColor, Terminal: env.Terminal}
}

// diagnosticsView is the part of every command view that prints diagnostics.
type diagnosticsView interface {
	Diagnostics(diags hcl.Diagnostics, files ...map[string][]byte)
}
