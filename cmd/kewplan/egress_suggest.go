package main

import (
	"fmt"

	"github.com/kewplan/kewplan/egress/suggest"
	"github.com/kewplan/kewplan/views"
)

// EgressCmd groups the commands about egress allowlists.
type EgressCmd struct {
	Suggest EgressSuggestCmd `cmd:"" help:"Print the egress allow entries that would have allowed a run's recorded denials, for review; it changes no file."`
}

// EgressSuggestCmd is `kewplan egress suggest RUN [NODE...]`.
type EgressSuggestCmd struct {
	RunID          string   `arg:"" name:"run" help:"The run id (from kewplan runs)."`
	Nodes          []string `arg:"" optional:"" name:"node" help:"Only these nodes' denials (node block names). Default: every node of the run."`
	runsStateFlags `embed:""`
}

// Help shows an example.
func (EgressSuggestCmd) Help() string {
	return "Example:\n  kewplan egress suggest 20261130T101430Z-8f5b00\n  kewplan egress suggest 20261130T101430Z-8f5b00 fix --json\n\n" +
		"Prints sandbox and node blocks with egress { allow = [...] }: a host every node of the run asked for goes in\n" +
		"the sandbox's block, any other in its node's, ports kept. The output is formatted as kewplan fmt writes it;\n" +
		"review it and merge what you accept into the configuration."
}

// Run reads the run's denials from the ledger and prints the proposal.
func (c *EgressSuggestCmd) Run(env *Env) error {
	l, err := openLedger(c.StateDir)
	if err != nil {
		return err
	}
	defer l.Close()
	run, nodes, err := recordedRun(l, c.RunID)
	if err != nil {
		return err
	}
	denials, err := l.EgressDenials(run.ID)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(nodes))
	for _, n := range nodes {
		names = append(names, n.Node)
	}
	if len(c.Nodes) > 0 {
		known := map[string]bool{}
		for _, n := range names {
			known[suggest.BlockName(n)] = true
		}
		for _, n := range c.Nodes {
			if !known[n] {
				return fmt.Errorf("run %s has no node %q; kewplan runs show %s lists its nodes", run.ID, n, run.ID)
			}
		}
		names = c.Nodes
	}
	return views.NewEgressSuggest(views.ViewTypeOf(c.JSON), env.streams()).Suggestion(suggest.Build(run.ID, names, denials))
}
