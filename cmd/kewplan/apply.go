package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/docker/go-units"
	"github.com/zclconf/go-cty/cty"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/executor"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/planner"
	"github.com/kewplan/kewplan/views"
)

// ApplyCmd is `kewplan apply [PATH|PLANFILE] [--auto-approve] [--parallelism N] [--json] [--state-dir DIR] [--var …]
// [--var-file …] [--target …]`.
type ApplyCmd struct {
	Path        string   `arg:"" optional:"" default:"." help:"A configuration (.hcl file or directory), or a plan file saved with kewplan plan --out."`
	AutoApprove bool     `name:"auto-approve" help:"Apply without asking for confirmation (required without a terminal)."`
	Parallelism int      `name:"parallelism" default:"4" placeholder:"N" help:"Run at most N nodes at once."`
	JSON        bool     `name:"json" help:"Stream progress as NDJSON events on stdout."`
	StateDir    string   `name:"state-dir" placeholder:"DIR" help:"Where the run ledger, logs and checkouts live (default: .kewplan beside the configuration)."`
	Targets     []string `name:"target" sep:"none" placeholder:"NODE" help:"Apply only NODE and everything it depends on (repeatable)."`
	MinFree     string   `name:"min-free" placeholder:"SIZE" help:"Free space to keep on the filesystem holding the checkouts (e.g. 10g); a node is killed when the agent's writes go below it. Default: the larger of 1 GiB and 5% of that filesystem."`
	Policy      string   `name:"policy" placeholder:"FILE" help:"Also enforce the organisation policy block in FILE (a saved plan enforces the policy it was made with)."`
	VarFlags    `embed:""`
}

// Help shows an example.
func (ApplyCmd) Help() string {
	return "Example:\n  kewplan apply examples/demo --auto-approve\n  kewplan plan --out fix.plan && kewplan apply fix.plan\n\n" +
		"Exit status 0 when every node succeeded, 1 otherwise, 130 when interrupted."
}

// Run plans (or reads a saved plan), asks for approval, and applies.
func (c *ApplyCmd) Run(env *Env) error {
	if c.Parallelism < 1 {
		return fmt.Errorf("--parallelism must be at least 1, not %d", c.Parallelism)
	}
	var minFree int64
	if c.MinFree != "" {
		n, err := units.RAMInBytes(c.MinFree)
		if err != nil || n <= 0 {
			return fmt.Errorf("--min-free %q is not a size: give bytes with an optional unit, e.g. 512m or 10g", c.MinFree)
		}
		minFree = n
	}
	var (
		cfg   *config.Config
		vars  map[string]cty.Value
		plan  *planner.Plan
		saved bool
		files []map[string][]byte
	)
	if isSavedPlan(c.Path) {
		if len(c.Vars) > 0 || len(c.VarFiles) > 0 || len(c.Targets) > 0 || c.Policy != "" {
			return errors.New("a saved plan carries its own variables, targets and policy: --var, --var-file, --target and --policy cannot change it; run kewplan plan again instead")
		}
		doc, err := planner.ReadSaved(c.Path)
		if err != nil {
			return err
		}
		// Reload refuses a stale plan, re-plans it (with the policy it was made with) and refuses a plan file
		// whose nodes differ from that re-plan, so what runs is exactly what was reviewed.
		var p *planner.Plan
		if cfg, p, err = planner.Reload(doc); err != nil {
			return err
		}
		if vars, err = doc.Saved.Vars(); err != nil {
			return fmt.Errorf("saved plan variables: %w", err)
		}
		files = configSources(cfg)
		plan, saved = p, true
	} else {
		pl, ok := planFromFlags(env, c.Path, c.VarFlags, c.Targets, c.Policy)
		if !ok {
			return ExitCode(1)
		}
		cfg, vars, plan, files = pl.cfg, pl.vars, pl.plan, pl.files
	}

	// Show the plan (on stderr when stdout carries NDJSON), then ask.
	planOut := env.Stdout
	if c.JSON {
		planOut = env.Stderr
	}
	if saved {
		fmt.Fprintf(planOut, "Applying the saved plan %s: %s, config digest %s (unchanged since it was saved).\n",
			c.Path, pluralCount(len(plan.Nodes), "node", "nodes"), plan.ConfigDigest)
	} else if err := views.WritePlanHuman(planOut, views.NewPlanJSON(plan, version, files...)); err != nil {
		return err
	}
	if plan.HasErrors() {
		fmt.Fprintln(env.Stderr, "The plan has errors: nothing was applied.")
		return ExitCode(1)
	}
	if len(plan.Nodes) == 0 {
		fmt.Fprintln(planOut, "Nothing to apply: the configuration declares no nodes.")
		return nil
	}
	if !saved && !c.AutoApprove {
		if !env.StdinTTY {
			return errors.New("no terminal to ask for approval: review the plan above and run again with --auto-approve, or save it with kewplan plan --out FILE and apply that file")
		}
		fmt.Fprintf(planOut, "\nkewplan will run %d %s as shown above. Only 'yes' will be accepted to approve.\n\n  Enter a value: ", len(plan.Nodes), pluralWord(len(plan.Nodes), "node", "nodes"))
		answer, _ := bufio.NewReader(env.Stdin).ReadString('\n')
		if strings.TrimSpace(answer) != "yes" {
			fmt.Fprintln(planOut, "\nApply cancelled: nothing was run.")
			return ExitCode(1)
		}
		fmt.Fprintln(planOut)
	}

	stateDir := c.StateDir
	if stateDir == "" {
		stateDir = filepath.Join(cfg.Dir, executor.DefaultStateDir)
	}
	mode := views.ApplyPlain
	switch {
	case c.JSON:
		mode = views.ApplyJSON
	case env.Terminal:
		mode = views.ApplyLive
	}
	view := views.NewApplyView(env.Stdout, mode, useColor(env))
	defer view.Close()

	ctx, stopSignals, janitor := applySignals(env)
	defer stopSignals()
	sum, err := executor.Apply(ctx, executor.ApplyOptions{
		Config: cfg, Vars: vars, Plan: plan, StateDir: stateDir, Parallelism: c.Parallelism, MinFreeBytes: minFree,
		Environ: env.Environ, Hook: view, KewplanVersion: version, Janitor: janitor,
	})
	if err != nil {
		var pe *executor.PreflightError
		if errors.As(err, &pe) {
			fmt.Fprintf(env.Stderr, "Error: nothing was run; preflight found %s:\n", pluralCount(len(pe.Problems), "problem", "problems"))
			for _, p := range pe.Problems {
				fmt.Fprintf(env.Stderr, "  - %s\n", views.Sanitize(p))
			}
			return ExitCode(1)
		}
		return err
	}
	switch sum.Status {
	case ledger.RunSucceeded:
		return nil
	case ledger.RunCancelled:
		return ExitCode(130)
	default:
		return ExitCode(1)
	}
}

// applySignals cancels the apply's context on the first SIGINT or SIGTERM, so it starts nothing new and kills
// and removes what runs; a second signal makes one last bounded cleanup attempt and exits 130 at once.
func applySignals(env *Env) (context.Context, func(), *executor.Janitor) {
	ctx, cancel := context.WithCancel(context.Background())
	janitor := executor.NewJanitor()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	stopped := make(chan struct{})
	go func() {
		select {
		case <-sigs:
		case <-stopped:
			return
		}
		fmt.Fprintln(env.Stderr, "\nInterrupted: starting nothing new; killing and removing the running containers. Interrupt again to exit at once.")
		cancel()
		select {
		case <-sigs:
		case <-stopped:
			return
		}
		fmt.Fprintln(env.Stderr, "Interrupted again: a last cleanup attempt, then exiting.")
		for _, err := range janitor.Now(10 * time.Second) {
			fmt.Fprintf(env.Stderr, "Cleanup failed: %s\n", views.Sanitize(err.Error()))
		}
		os.Exit(130)
	}()
	return ctx, func() { signal.Stop(sigs); close(stopped); cancel() }, janitor
}

// isSavedPlan tells a plan file from a configuration: a regular file that is not .hcl and whose first byte is '{'.
func isSavedPlan(path string) bool {
	if strings.HasSuffix(path, ".hcl") {
		return false
	}
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 512)
	n, _ := io.ReadFull(f, head)
	return bytes.HasPrefix(bytes.TrimSpace(head[:n]), []byte("{"))
}

func pluralWord(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func pluralCount(n int, one, many string) string {
	return fmt.Sprintf("%d %s", n, pluralWord(n, one, many))
}
