package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/plandiff"
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
		"show checks what apply checks. Exit status 1 when the plan has errors; when the plan file does not match\n" +
		"itself, its recorded inputs or what its configuration plans (it was edited by hand: it is not shown); or\n" +
		"when a saved plan is stale: a configuration file, a file it reads, or a variable changed since it was saved."
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
	// What apply checks, before anything that looks like a valid plan is shown: the document against itself,
	// then a saved plan against its recorded inputs and its configuration (stale check and re-plan).
	if problems := plandiff.CheckDocument(doc); len(problems) > 0 {
		view.Stale(fmt.Errorf("%w what kewplan plan writes: %s. It was edited after kewplan plan wrote it: do not apply it; run kewplan plan again and review the new plan",
			planfile.ErrMismatch, strings.Join(problems, "; ")))
		return ExitCode(exitError)
	}
	var stale error
	var cfg *config.Config
	if doc.Saved != nil {
		if cfg, _, err = f.Reload(); err != nil {
			switch {
			case errors.Is(err, planfile.ErrMismatch):
				view.Stale(err)
				return ExitCode(exitError)
			case errors.Is(err, planfile.ErrStale):
				stale = err
			default:
				return err
			}
		}
	}
	if err := view.Plan(doc); err != nil {
		return err
	}
	if stale == nil && cfg != nil {
		if err := c.showApprovals(env, f, cfg); err != nil {
			return err
		}
	}
	if stale != nil {
		view.Stale(stale)
		return ExitCode(exitError)
	}
	if doc.HasErrors() {
		return ExitCode(exitError)
	}
	return nil
}
