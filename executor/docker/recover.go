package docker

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/kewplan/kewplan/executor/adapter"
	"github.com/kewplan/kewplan/executor/engine"
	"github.com/kewplan/kewplan/planner"
)

var _ adapter.OrphanStopper = (*dockerEngine)(nil)

// ForRecovery connects to the Docker engine of run.Environ for a command that runs no node but found the runs of a
// dead apply: only StopOrphans, Sweep and Close may be called on what it returns.
func ForRecovery(ctx context.Context, run *adapter.Run) (adapter.Engine, error) {
	d := newEngine()
	d.run, d.env = run, engine.EnvMap(run.Environ)
	eng, err := engine.Connect(ctx, run.Environ)
	if err != nil {
		return nil, err
	}
	d.engine = eng
	return d, nil
}

// orphans are the containers this state directory's dead applies left: found by kewplan's run label and owned by
// this state directory (a bind mount under its checkouts, its egress proxy, or a run its ledger records). The
// caller holds the state lock, so none of them belongs to a live apply.
func (d *dockerEngine) orphans(ctx context.Context) ([]engine.ContainerSummary, error) {
	list, err := d.engine.ListContainers(ctx, planner.LabelRun)
	if err != nil {
		return nil, err
	}
	checkouts := d.run.Dir.Checkouts()
	var out []engine.ContainerSummary
	for _, c := range list {
		owned := d.ownedEgressProxy(c.Labels) || d.run.Known(c.Labels[planner.LabelRun])
		for _, src := range c.BindSources {
			if rel, err := filepath.Rel(checkouts, src); err == nil && !strings.HasPrefix(rel, "..") {
				owned = true
			}
		}
		if owned {
			out = append(out, c)
		}
	}
	return out, nil
}

// StopOrphans kills every container of this state directory's dead applies and waits until none runs, leaving
// them and their checkouts in place for the loop to keep the work from; Sweep removes them afterwards. It returns
// the runs it could not confirm stopped (or, when it could not list them, every run: nil, false).
func (d *dockerEngine) StopOrphans(ctx context.Context, run *adapter.Run) (unstopped map[string]bool, listed bool) {
	d.run = run
	list, err := d.orphans(ctx)
	if err != nil {
		run.Warn("", fmt.Sprintf("could not look for orphaned containers: %v", err))
		return nil, false
	}
	unstopped = map[string]bool{}
	for _, c := range list {
		if c.State != "running" && c.State != "restarting" && c.State != "paused" {
			continue
		}
		owner := c.Labels[planner.LabelRun]
		if err := d.engine.Kill(ctx, c.ID); err != nil {
			run.Warn("", fmt.Sprintf("could not stop container %s left by run %s: %v", c.Name, owner, err))
			unstopped[owner] = true
			continue
		}
		run.Warn("", fmt.Sprintf("stopped container %s left running by run %s (kewplan pid %s)", c.Name, owner, c.Labels[LabelPID]))
	}
	return unstopped, true
}
