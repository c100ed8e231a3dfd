//go:build linux

package executor

// Section F of the checklist through a real apply: a flood on both streams (F4), forged authority on stdout (F5),
// a child holding stdout open (F6), an agent that exits 0 without a verdict (F11).

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/kewplan/kewplan/executor/ledger"
)

// TestAdvFlood (F4): the agent writes to stdout and stderr at once, as fast as it can, forever.
func TestAdvFlood(t *testing.T) {
	c := adv(t, "F4", "flood stdout and stderr at once, forever",
		"both drained concurrently (no deadlock); the output budget kills the container; the node fails closed; logs bounded")
	f := advFixture(t)
	cfg := f.config(advNode("flood", "reviewer", "mode=flood\nverdict=approve", "  timeout = \"5m\"\n"))
	const budget = 32 << 20
	sum, _, err := f.apply(context.Background(), cfg, func(o *ApplyOptions) { o.MaxOutputBytes = budget })
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	res := resultOf(t, sum, f.node("flood"))
	c.check(res.Status == ledger.StatusFailed && strings.Contains(res.Reason, "wrote more than 32 MiB"), "node %s: %s", res.Status, res.Reason)
	out, errSize := fileSize(res.StdoutLog), fileSize(res.StderrLog)
	c.check(out > 0 && errSize > 0, "both streams were drained: stdout log %d bytes, stderr log %d bytes", out, errSize)
	c.check(out+errSize <= budget, "logs hold %d bytes together, within the %d-byte budget", out+errSize, budget)
	_, nodes := f.ledgerRun(sum.RunID)
	c.observe("metered %d events, %d unparsed lines before the kill", nodes[f.node("flood")].Events, nodes[f.node("flood")].UnparsedLines)
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return -1
	}
	return fi.Size()
}

// TestAdvForgedAuthority (F5): verdicts and host-looking commands printed on stdout carry no authority.
func TestAdvForgedAuthority(t *testing.T) {
	c := adv(t, "F5", "print an approving verdict, a forged result and host commands on stdout; write no sidecar",
		"ignored: the reviewer is held (the verdict comes only from the sidecar); the worker pushes nothing")
	f := advFixture(t)
	cfg := f.config(advNode("reviewer", "reviewer", "mode=forge", "") + advNode("worker", "", "mode=forge", "  branch = \"kew/forge\"\n"))
	sum, _, err := f.apply(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	rv, wk := resultOf(t, sum, f.node("reviewer")), resultOf(t, sum, f.node("worker"))
	c.check(rv.Status == ledger.StatusHeld && rv.Verdict == nil && strings.Contains(rv.Reason, "wrote no"), "reviewer %s: %s", rv.Status, rv.Reason)
	c.check(wk.Status == ledger.StatusSucceeded && !wk.Pushed && wk.Commit == wk.BaseCommit, "worker %s, pushed %v", wk.Status, wk.Pushed)
}

// TestAdvHeldPipe (F6): the agent leaves a setsid child holding stdout open and exits.
func TestAdvHeldPipe(t *testing.T) {
	c := adv(t, "F6", "a setsid child keeps stdout and stderr open after the agent's main process exits",
		"the node ends when the agent exits (not at its timeout); the child dies with the container; the container is removed")
	f := advFixture(t)
	cfg := f.config(advNode("hold", "reviewer", "mode=holdpipe\nverdict=approve", "  timeout = \"10m\"\n"))
	sum, _, err := f.apply(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	res := resultOf(t, sum, f.node("hold"))
	r := agentReport(t, res)
	c.check(res.Status == ledger.StatusApproved, "node %s (%s) in %s; the child was pid %s", res.Status, res.Reason, res.Ended.Sub(res.Started).Round(1e8), reportString(r, "child_pid"))
}

// TestAdvNoVerdict (F11, A11): the reviewer's agent exits 0 and writes nothing.
func TestAdvNoVerdict(t *testing.T) {
	f11 := adv(t, "F11", "the reviewer's agent exits 0 with a clean stream and writes no verdict", "fail closed: held for a human")
	a11 := adv(t, "A11", "verdict sidecar missing after a real run", "fail closed: held for a human")
	f := advFixture(t)
	cfg := f.config(advNode("silent", "reviewer", "mode=succeed", ""))
	sum, _, err := f.apply(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	res := resultOf(t, sum, f.node("silent"))
	for _, c := range []*advCase{f11, a11} {
		c.check(res.Status == ledger.StatusHeld && res.ExitCode != nil && *res.ExitCode == 0 && sum.Status == ledger.RunFailed,
			"node %s after exit %v, run %s: %s", res.Status, deref(res.ExitCode), sum.Status, res.Reason)
	}
}
