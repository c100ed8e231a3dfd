package main

import (
	"errors"

	"github.com/kewplan/kewplan/planfile"
	"github.com/kewplan/kewplan/views"
)

// ShowCmd is `kewplan show PLANFILE [--json | --format F]`.
type ShowCmd struct {
	PlanFile string `arg:"" name:"planfile" help:"A plan saved with kewplan plan --out (or printed by kewplan plan --json)."`
	JSON     bool   `name:"json" help:"Print the plan as JSON (the same as --format json)."`
	Format   string `name:"format" default:"human" placeholder:"FORMAT" help:"Output format: human, json or markdown."`
}

// Help shows an example.
func (ShowCmd) Help() string {
	return "Example:\n  kewplan plan --out review.plan && kewplan show review.plan\n\n" +
		"Exit status 1 when the plan has errors, or when a saved plan is stale: a configuration file, a file it\n" +
		"reads, or a variable changed since it was saved (kewplan apply would refuse it)."
}

// Run renders the plan file, then checks that a saved plan still matches its configuration.
func (c *ShowCmd) Run(env *Env) error {
	paths := &sarifPaths{}
	view, err := views.NewShow(planFormat(c.Format, c.JSON), env.streams(), views.SARIFOptions{URI: paths.uri})
	if err != nil {
		return err
	}
	f, err := planfile.Read(c.PlanFile)
	if err != nil {
		return err
	}
	doc := f.Doc
	paths.dir, paths.isConfig = docConfigDir(doc, c.PlanFile), savedConfigFiles(doc)
	if err := view.Plan(doc); err != nil {
		return err
	}
	failed := doc.HasErrors()
	if doc.Saved != nil {
		if err := f.CheckStale(); err != nil {
			if !errors.Is(err, planfile.ErrStale) {
				return err
			}
			view.Stale(err)
			failed = true
		}
	}
	if failed {
		return ExitCode(1)
	}
	return nil
}
