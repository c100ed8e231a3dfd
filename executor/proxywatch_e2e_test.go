package executor

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kewplan/kewplan/egress"
	"github.com/kewplan/kewplan/executor/docker"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/statedir"
	"github.com/kewplan/kewplan/planner"
)

// The egress proxy dies mid-node: the test kills kewplan's proxy container (found by the run's labels) once the
// brokered node's first model call is metered, the node's next call goes through the proxy apply starts again,
// and the meter holds across the restart.

// proxyWatchNode is a brokered reviewer that makes calls model calls of 145 tokens each (the stand-in's 120
// input and 25 output), waits at the gate after the first, retries a call that finds no proxy, and approves.
// Its budget (max_tokens 300, warn_at 0.3) warns after the first call, the test's signal that the proxy has
// metered it; a third call, reserving 37 tokens on top of the 290 metered, is refused.
const proxyWatchNode = `
node "%[1]sNAME" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  role   = "reviewer"
  prompt = "mode=modelcalls\ncalls=CALLS\ngate_after=1\nretry=1\nfinal_usage=none\ntokens=none\ncost=none\nverdict=approve"
  budget {
    max_tokens = 300
    warn_at    = 0.3
  }
}
`

// warnSignal is a hook that hands each budget warning's node to a channel.
type warnSignal struct {
	NilHook
	ch chan BudgetWarningEvent
}

func (w *warnSignal) BudgetWarning(e BudgetWarningEvent) {
	select {
	case w.ch <- e:
	default:
	}
}

// killEgressProxy kills the run's proxy process (its container found by the run's and the role's labels) and
// returns its id.
func (f *fixture) killEgressProxy(ctx context.Context, runID string) string {
	f.t.Helper()
	list, err := f.eng.ListContainers(ctx, planner.LabelRun+"="+runID)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, c := range list {
		if c.Labels[docker.LabelRole] == docker.RoleEgressProxy && c.State == "running" {
			if err := f.eng.Kill(ctx, c.ID); err != nil {
				f.t.Fatal(err)
			}
			return c.ID
		}
	}
	f.t.Fatalf("no running egress proxy of run %s among %+v", runID, list)
	return ""
}

// openGate lets the first attempt of a node of plan, its agent waiting at its gate, go on.
func (f *fixture) openGate(plan *planner.Plan, runID, node string) {
	f.t.Helper()
	slug := node
	for _, np := range plan.Nodes {
		if np.Name == node {
			slug = np.Slug
		}
	}
	gate := filepath.Join(statedir.Dir{Root: f.stateDir}.Checkout(runID, node, slug, 1), ".kew-gate")
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// runEvents are a run's events from the ledger.
func (f *fixture) runEvents(runID string) []ledger.RunEvent {
	return readLedger(f, func(l *ledger.Ledger) ([]ledger.RunEvent, error) { return l.RunEvents(runID) })
}

// applyWithKill applies cfg and, when the first budget warning says the proxy metered the first call, runs kill
// with the run's id, then opens the node's gate.
func (f *fixture) applyWithKill(ctx context.Context, cfg string, node string, kill func(runID string), tweak ...func(*ApplyOptions)) (*ApplySummary, *recorder) {
	f.t.Helper()
	c := f.config(cfg)
	plan := f.plan(c)
	sig := &warnSignal{ch: make(chan BudgetWarningEvent, 1)}
	type result struct {
		sum *ApplySummary
		rec *recorder
		err error
	}
	done := make(chan result, 1)
	go func() {
		tweaks := append([]func(*ApplyOptions){brokered(testAPIKey())}, tweak...)
		sum, rec, err := f.apply(ctx, c, append(tweaks, func(o *ApplyOptions) { o.Hooks = append(o.Hooks, sig) })...)
		done <- result{sum, rec, err}
	}()
	select {
	case e := <-sig.ch:
		if e.Node != node {
			f.t.Fatalf("budget warning of %s, want %s", e.Node, node)
		}
		kill(e.RunID)
		f.openGate(plan, e.RunID, node)
	case r := <-done:
		f.t.Fatalf("the apply ended before the first call was metered: %v %+v", r.err, r.sum)
	}
	r := <-done
	if r.err != nil {
		f.t.Fatal(r.err)
	}
	return r.sum, r.rec
}

// TestEgressProxyRestartedMidNode: the proxy is killed while a brokered node runs, between its first model call
// and its second. Apply says at once that it exited (the node running, status 137) and that it runs again, the
// ledger records both, the node's second call (retried by the agent until the new proxy answers, at the same
// URL with the same placeholder) succeeds, and the third is refused on the 290 tokens metered before and after
// the restart: the meter was not reset. The node approves, with a warning that the proxy died under it.
func TestEgressProxyRestartedMidNode(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	f.modelStandIn(ctx)
	name := f.node("brok")
	var killed string
	sum, rec := f.applyWithKill(ctx, watchedNode("brok", 3), name, func(runID string) { killed = f.killEgressProxy(ctx, runID) })
	f.assertClean(sum.RunID)

	res := resultOf(t, sum, name)
	if res.Status != ledger.StatusApproved {
		t.Errorf("node: %s (%s), want approved", res.Status, res.Reason)
	}
	calls := modelCalls(t, res.StdoutLog)
	if len(calls) != 3 || calls[0]["status"] != float64(200) || calls[1]["status"] != float64(200) {
		t.Fatalf("model calls %v, want the first two answered", calls)
	}
	if want := "the proxy metered 290 tokens"; calls[2]["status"] != float64(402) || !strings.Contains(calls[2]["message"].(string), want) {
		t.Errorf("third call %v, want it refused on the spend before and after the restart (%q)", calls[2], want)
	}
	t.Logf("the second call took %v tries", calls[1]["tries"])

	meters := 0
	for _, m := range f.meters(sum.RunID) {
		if m.Node == name {
			meters++
			if m.Proxy.Tokens != 290 {
				t.Errorf("proxy meter %+v, want both answered calls, 290 tokens", m.Proxy)
			}
		}
	}
	if meters != 1 {
		t.Errorf("%d meters of %s, want 1", meters, name)
	}

	events := f.runEvents(sum.RunID)
	if len(events) != 2 || events[0].Kind != ledger.RunEventProxyExited || events[1].Kind != ledger.RunEventProxyRestarted {
		t.Fatalf("run events %+v, want the proxy's exit then its restart", events)
	}
	if e := events[0]; e.Nodes != name || !strings.Contains(e.Message, "exited with status 137 while node \""+name+"\" was running") {
		t.Errorf("exit event %+v", e)
	}
	out := rec.warningText()
	for _, want := range []string{"exited with status 137 while node \"" + name + "\" was running; its last line on stderr:",
		"kewplan's egress proxy runs again at the same addresses (restart 1 of at most 5 in this run)"} {
		if !strings.Contains(out, want) {
			t.Errorf("apply's warnings do not say %q:\n%s", want, out)
		}
	}
	onNode := false
	for _, w := range rec.warnings {
		onNode = onNode || w.Node == name && strings.Contains(w.Message, "the egress proxy died while this attempt ran")
	}
	if !onNode {
		t.Errorf("no warning on node %s that the proxy died under it:\n%s", name, out)
	}
	if killed == "" {
		t.Error("no proxy was killed")
	}
}

// watchedNode is proxyWatchNode named name, making calls model calls.
func watchedNode(name string, calls int) string {
	return strings.NewReplacer("NAME", name, "CALLS", strconv.Itoa(calls)).Replace(proxyWatchNode)
}

// uniqueProxyBinary is kewplan's binary with random bytes after its end: the same program under a proxy image
// tag of its own, which a test may remove without disturbing another's.
func uniqueProxyBinary(t *testing.T) (path, tag string) {
	t.Helper()
	bin, err := os.ReadFile(kewplanBin(t))
	if err != nil {
		t.Fatal(err)
	}
	tail := make([]byte, 32)
	_, _ = rand.Read(tail)
	bin = append(bin, tail...)
	path = filepath.Join(t.TempDir(), "kewplan")
	if err := os.WriteFile(path, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	tag, err = egress.ImageTag(bytes.NewReader(bin))
	if err != nil {
		t.Fatal(err)
	}
	return path, tag
}

// TestEgressProxyThatCannotRestart: the proxy's image is removed and its process killed while a brokered node
// runs. Every start of a new proxy fails, so the proxy is lost: the running node is stopped and fails with that
// reason, the node after it fails without starting, and the ledger records the exit and the loss.
func TestEgressProxyThatCannotRestart(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	f.modelStandIn(ctx)
	bin, tag := uniqueProxyBinary(t)
	name, next := f.node("brok"), f.node("next")
	cfg := watchedNode("brok", 2) + watchedNode("next", 1)
	var imageID string
	sum, rec := f.applyWithKill(ctx, cfg, name, func(runID string) {
		info, err := f.eng.InspectImage(ctx, tag)
		if err != nil {
			t.Fatal(err)
		}
		imageID = info.ID
		if err := f.eng.RemoveImage(ctx, tag); err != nil {
			t.Fatal(err)
		}
		f.killEgressProxy(ctx, runID)
	}, func(o *ApplyOptions) { o.ProxyBinary, o.Parallelism = bin, 1 })
	t.Cleanup(func() { _ = f.eng.RemoveImage(context.Background(), imageID) })
	f.assertClean(sum.RunID)

	if sum.Status == ledger.RunSucceeded {
		t.Errorf("the run succeeded without its proxy")
	}
	for _, tc := range []struct{ node, want string }{
		{name, "kewplan stopped its container"},
		{next, "nothing ran"},
	} {
		res := resultOf(t, sum, tc.node)
		if res.Status != ledger.StatusFailed || !strings.Contains(res.Reason, "the node reaches hosts through kewplan's egress proxy, which is gone: ") ||
			!strings.Contains(res.Reason, "could not be started again (3 tries)") || !strings.Contains(res.Reason, tc.want) {
			t.Errorf("%s: %s (%s), want failed because the proxy could not be started again, saying %q", tc.node, res.Status, res.Reason, tc.want)
		}
	}
	events := f.runEvents(sum.RunID)
	if len(events) != 2 || events[0].Kind != ledger.RunEventProxyExited || events[1].Kind != ledger.RunEventProxyLost || events[1].Nodes != name {
		t.Fatalf("run events %+v, want the proxy's exit then its loss, with the node running", events)
	}
	if !strings.Contains(rec.warningText(), "could not be started again (3 tries)") {
		t.Errorf("apply's warnings do not say the proxy is lost:\n%s", rec.warningText())
	}
}
