package main

import (
	"context"
	"errors"

	"github.com/zclconf/go-cty/cty"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/executor"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/statedir"
	"github.com/kewplan/kewplan/planner"
	"github.com/kewplan/kewplan/views"
)

// applyStateDir is --state-dir, or the state directory beside the configuration.
func applyStateDir(flag string, cfg *config.Config) string {
	if flag != "" {
		return flag
	}
	return statedir.Beside(cfg.Dir)
}

// planResume decides, for apply --resume, which nodes reuse the named run's outputs: the run's records read from
// the ledger (latest resolved to the newest finished run, pushed branches checked on their remotes) against the
// plan, each downstream node re-rendered with its reused dependencies' recorded outputs.
func planResume(stateDir string, a *toApply) (*planner.ResumePlan, error) {
	prev, err := executor.LoadPreviousRun(context.Background(), statedir.Dir{Root: stateDir}, a.resume, a.plan, a.cfg.Dir)
	if err != nil {
		return nil, err
	}
	in := planner.Inputs{Vars: a.vars, FS: config.DirFS(a.cfg.Dir)}
	return planner.Resume(a.plan, prev, func(name string, outs map[string]map[string]cty.Value) (*planner.NodePlan, error) {
		np, diags := planner.RenderNode(a.cfg, in, name, outs)
		if diags.HasErrors() {
			return nil, errors.New(config.DiagnosticsText(diags))
		}
		return np, nil
	}), nil
}

// nodeHistory maps a run's attempt rows and reuse to the view model of runs show. A node without attempt rows
// (recorded before attempts were, or never started) has no entry: the view shows its record as its attempt.
func nodeHistory(nodes []ledger.NodeRecord, attempts map[string][]ledger.AttemptRecord) map[string]views.NodeHistory {
	hist := map[string]views.NodeHistory{}
	for _, n := range nodes {
		if n.ReusedFrom != "" {
			hist[n.Node] = views.NodeHistory{ReusedFrom: n.ReusedFrom}
			continue
		}
		rows := attempts[n.Node]
		if len(rows) == 0 {
			continue
		}
		h := views.NodeHistory{Attempts: make([]views.AttemptJSON, len(rows))}
		for i, a := range rows {
			h.Attempts[i] = views.AttemptJSON{Attempt: a.Attempt, Status: a.Status, ExitCode: a.ExitCode, StopReason: a.StopReason,
				StartedAt: a.StartedAt, EndedAt: a.EndedAt, InputTokens: a.InputTokens, OutputTokens: a.OutputTokens,
				CacheReadTokens: a.CacheReadTokens, CacheWriteTokens: a.CacheWriteTokens, CostUSD: a.CostUSD,
				StdoutLog: a.StdoutLog, StderrLog: a.StderrLog}
			if a.RetryWait > 0 {
				h.Attempts[i].RetryWait = a.RetryWait.String()
			}
		}
		hist[n.Node] = h
	}
	return hist
}
