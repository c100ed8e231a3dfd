package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"time"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/planner"
	"github.com/kewplan/kewplan/runners"
)

// Retry of transient failures.
//
// A node's attempts share its re-planned NodePlan (re-planned once: the upstream outputs do not change between
// attempts) but nothing else: each attempt clones a fresh checkout of the same ref, writes its own logs and its
// own node_attempts row. Only the classes a retry block names are retried (api_error, engine_error, timeout);
// an agent that exits non-zero by itself, a held verdict, a cancellation, an output or disk limit, a push that
// failed is never retried: trying again would fail the same way, or do what the user stopped.

// runAttempts runs a node's attempts until one is not retried, and leaves in res the last attempt's outcome with
// the tokens and cost of every attempt added up.
func (a *applier) runAttempts(ctx context.Context, np *planner.NodePlan, res *ledger.NodeResult) *nodeFailure {
	policy := np.Retry
	var spent runners.RunTotals // the attempts before this one
	for attempt := 1; ; attempt++ {
		resetAttempt(res)
		res.Attempts = attempt
		dir := a.dir.Checkout(a.runID, np.Name, np.Slug, attempt)
		started := time.Now()
		f := a.attemptNode(ctx, np, res)
		rec := attemptRecord(res, attempt, f, started, time.Now())
		retry := f != nil && f.Class != "" && ctx.Err() == nil && a.engineLost() == nil && policy.Retries(f.Class, attempt)
		if retry {
			rec.RetryWait = planner.RetryWait(policy.Backoff, attempt, a.opts.retryRand)
		}
		a.redactAttempt(&rec, np.Credentials)
		if err := a.ledger.RecordAttempt(rec); err != nil {
			a.warn(np.Name, err.Error())
		}
		spent = addTotals(spent, res.Totals)
		if !retry {
			res.Totals = spent // the last attempt's checkout is removed by runNode, once the outcome is recorded
			if f != nil && attempt > 1 && f.Class != "" {
				f.Reason = fmt.Sprintf("%s after %d attempts", rec.StopReason, attempt)
			}
			return f
		}
		if !a.opts.KeepCheckouts {
			a.removeCheckout(np.Name, dir)
		}
		a.hook.NodeRetry(NodeRetryEvent{RunID: a.runID, Node: np.Name, Attempt: attempt, NextAttempt: attempt + 1,
			MaxAttempts: policy.Attempts, Class: f.Class, Reason: rec.StopReason, Wait: rec.RetryWait, Time: time.Now()})
		if err := a.retrySleep(ctx, rec.RetryWait); err != nil {
			res.Totals = spent
			return failed(ledger.StatusCancelled, fmt.Sprintf("the apply was cancelled while waiting to retry after attempt %d (%s)", attempt, rec.StopReason))
		}
	}
}

func (a *applier) removeCheckout(node, dir string) {
	if err := os.RemoveAll(dir); err != nil {
		a.warn(node, fmt.Sprintf("could not remove the checkout %s: %v", dir, err))
	}
}

// retrySleep waits d, or returns ctx's error as soon as it is cancelled.
func (a *applier) retrySleep(ctx context.Context, d time.Duration) error {
	if a.opts.retrySleep != nil {
		return a.opts.retrySleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// resetAttempt clears what an attempt fills, so that nothing of a failed attempt is taken for the next one's.
func resetAttempt(r *ledger.NodeResult) {
	r.Status, r.Reason, r.ExitCode, r.Totals, r.Argv = ledger.StatusRunning, "", nil, runners.RunTotals{}, nil
	r.StdoutLog, r.StderrLog, r.BaseCommit, r.Commit, r.Branch, r.Pushed, r.PullRequest, r.Verdict = "", "", "", "", "", false, "", nil
}

// attemptRecord is the ledger row of an attempt that just ended with f (nil: it succeeded).
func attemptRecord(res *ledger.NodeResult, attempt int, f *nodeFailure, started, ended time.Time) ledger.AttemptRecord {
	rec := ledger.AttemptRecord{RunID: res.RunID, Node: res.Node, Attempt: attempt, Status: res.Status, ExitCode: res.ExitCode,
		StartedAt: &started, EndedAt: &ended, InputTokens: res.Totals.InputTokens, OutputTokens: res.Totals.OutputTokens,
		CacheReadTokens: res.Totals.CacheReadTokens, CacheWriteTokens: res.Totals.CacheWriteTokens, CostUSD: res.Totals.CostUSD,
		SessionID: res.Totals.SessionID, StdoutLog: res.StdoutLog, StderrLog: res.StderrLog, BaseCommit: res.BaseCommit}
	if f != nil {
		rec.Status, rec.StopClass, rec.StopReason = f.Status, f.Class, f.Reason
		switch f.Class {
		case "":
		case config.RetryOnAPIError:
			rec.StopReason = f.Class + ": " + res.Totals.APIError
		default:
			rec.StopReason = f.Class + ": " + f.Reason
		}
	}
	return rec
}

// redactAttempt removes the node's credential values from an attempt's agent-derived strings, as redactResult
// does for the node's row.
func (a *applier) redactAttempt(rec *ledger.AttemptRecord, names []string) {
	r := ledger.NodeResult{Reason: rec.StopReason, Totals: runners.RunTotals{SessionID: rec.SessionID}}
	a.redactResult(&r, names)
	rec.StopReason, rec.SessionID = r.Reason, r.Totals.SessionID
}

// addTotals adds an attempt's tokens and cost to the attempts before it; every other figure is the later one's.
func addTotals(before, now runners.RunTotals) runners.RunTotals {
	sum := now
	sum.InputTokens += before.InputTokens
	sum.OutputTokens += before.OutputTokens
	sum.CacheReadTokens += before.CacheReadTokens
	sum.CacheWriteTokens += before.CacheWriteTokens
	if before.CostUSD != nil {
		c := *before.CostUSD
		if now.CostUSD != nil {
			c += *now.CostUSD
		}
		sum.CostUSD = &c
	}
	return sum
}

// fingerprint is the JSON of a node's input fingerprint as it runs: its re-planned NodePlan, the upstream
// outputs it was re-planned with (a dependency's outputs never change once it finished) and the image's id; ""
// when the node cannot be fingerprinted.
func (a *applier) fingerprint(np *planner.NodePlan, imageID string) string {
	a.mu.Lock()
	outputs := maps.Clone(a.outputs)
	a.mu.Unlock()
	fp, ok := planner.Fingerprint(np, outputs, imageID)
	if !ok {
		return ""
	}
	b, err := json.Marshal(fp)
	if err != nil {
		return ""
	}
	return string(b)
}
