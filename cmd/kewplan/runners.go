package main

import (
	"path/filepath"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/planner"
	"github.com/kewplan/kewplan/views"
)

// RunnersCmd is `kewplan runners [PATH] [--json]`.
type RunnersCmd struct {
	Path string `arg:"" optional:"" help:"A .hcl file, or a directory whose *.hcl files form the configuration (default: the current directory, when it holds any)."`
	JSON bool   `name:"json" help:"Print the runners as JSON."`
}

// Help shows an example.
func (RunnersCmd) Help() string {
	return "Example:\n  kewplan runners examples/multi-runner.hcl\n\n" +
		"Without a configuration it lists the built-in runners. A credential added by a runner block shows where\n" +
		"it was declared: that is a widening of what the runner's agent can read."
}

// Run lists the built-in runners and the configuration's runner blocks.
func (c *RunnersCmd) Run(env *Env) error {
	view := views.NewRunners(views.ViewTypeOf(c.JSON), env.streams())
	var cfg *config.Config
	path := c.Path
	if path == "" {
		if found, _ := filepath.Glob("*.hcl"); len(found) > 0 {
			path = "."
		}
	}
	if path != "" {
		loaded, diags := config.Load(path)
		if diags.HasErrors() {
			view.Diagnostics(diags, configSources(loaded)...)
			return ExitCode(1)
		}
		cfg = loaded
	}
	return view.Runners(planner.ListRunners(cfg))
}
