package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/statedir"
	"github.com/kewplan/kewplan/views"
)

// RunsCmd is `kewplan runs [--json] [--state-dir DIR]` and `kewplan runs show RUN [--json]`.
type RunsCmd struct {
	List  RunsListCmd  `cmd:"" default:"withargs" help:"List recorded runs, newest first."`
	Show  RunsShowCmd  `cmd:"" help:"Show one run: each node with its telemetry, outcome and verdict."`
	Prune RunsPruneCmd `cmd:"" help:"Remove old runs' checkouts, logs and kept work; their ledger rows stay, marked pruned."`
}

// Help shows an example.
func (RunsCmd) Help() string {
	return "Example:\n  kewplan runs\n  kewplan runs show 20261130T101430Z-8f5b00 --json"
}

// runsStateFlags locate the ledger.
type runsStateFlags struct {
	StateDir string `name:"state-dir" placeholder:"DIR" help:"The state directory of the runs (default: .kewplan in the current directory)."`
	JSON     bool   `name:"json" help:"Print JSON."`
}

// RunsListCmd lists runs.
type RunsListCmd struct {
	runsStateFlags `embed:""`
}

// Help shows an example.
func (RunsListCmd) Help() string {
	return "Example:\n  kewplan runs --state-dir examples/demo/.kewplan"
}

// Run lists the runs of the ledger.
func (c *RunsListCmd) Run(env *Env) error {
	recoverState(env, c.StateDir)
	l, err := openLedger(c.StateDir)
	if err != nil {
		return err
	}
	defer l.Close()
	runs, err := l.Runs()
	if err != nil {
		return err
	}
	return views.NewRuns(views.ViewTypeOf(c.JSON), env.streams()).List(runs)
}

// RunsShowCmd shows one run.
type RunsShowCmd struct {
	RunID          string `arg:"" name:"run" help:"The run id (from kewplan runs)."`
	Format         string `name:"format" enum:"text,json,html" default:"text" help:"text, json (as --json) or html: one self-contained page with the graph, a timeline, both meters, denials, verdicts and the receipt (kewplan runs show RUN --format html > run.html)."`
	runsStateFlags `embed:""`
}

// Help shows an example.
func (RunsShowCmd) Help() string {
	return "Example:\n  kewplan runs show 20261130T101430Z-8f5b00"
}

// Run shows the run.
func (c *RunsShowCmd) Run(env *Env) error {
	recoverState(env, c.StateDir)
	l, err := openLedger(c.StateDir)
	if err != nil {
		return err
	}
	defer l.Close()
	run, nodes, err := recordedRun(l, c.RunID)
	if err != nil {
		return err
	}
	attempts, err := l.Attempts(c.RunID)
	if err != nil {
		return err
	}
	denials, err := l.EgressDenials(run.ID)
	if err != nil {
		return err
	}
	brokered, err := l.BrokerRequests(run.ID)
	if err != nil {
		return err
	}
	meters, err := l.Meters(run.ID)
	if err != nil {
		return err
	}
	if c.Format == "html" {
		return views.NewRunReport(env.streams()).Show(views.RunReport{Run: run, Nodes: nodes, History: nodeHistory(nodes, attempts),
			Denials: denials, Meters: meters, Receipt: runReceipt(c.StateDir, run.ID)})
	}
	view := views.NewRuns(views.ViewTypeOf(c.JSON || c.Format == "json"), env.streams())
	if err := view.RunEgress(run, nodes, nodeHistory(nodes, attempts), denials, meters); err != nil {
		return err
	}
	if err := view.Brokered(brokered); err != nil {
		return err
	}
	return view.Meters(meters)
}

// openLedger opens an existing ledger; it never creates one where there is none.
// recordedRun reads a run and its nodes from the ledger; an unknown id says how to list the recorded ones.
func recordedRun(l *ledger.Ledger, id string) (*ledger.RunRecord, []ledger.NodeRecord, error) {
	run, nodes, err := l.Run(id)
	if errors.Is(err, ledger.ErrNoRun) {
		return run, nodes, fmt.Errorf("%v; list the recorded runs with kewplan runs", err)
	}
	return run, nodes, err
}

func openLedger(stateDir string) (*ledger.Ledger, error) {
	if stateDir == "" {
		stateDir = statedir.DefaultName
	}
	path := statedir.Dir{Root: stateDir}.Ledger()
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no run ledger at %s: nothing was applied with this state directory yet (use --state-dir to point at another)", path)
		}
		return nil, err
	}
	return ledger.Open(path)
}
