package executor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/zclconf/go-cty/cty"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/statedir"
	"github.com/kewplan/kewplan/planner"
)

// retryRecorder is a recorder that also keeps NodeRetry events and can act on them.
type retryRecorder struct {
	*recorder
	rmu     sync.Mutex
	retries []NodeRetryEvent
	onRetry func(NodeRetryEvent)
}

func (r *retryRecorder) NodeRetry(e NodeRetryEvent) {
	r.rmu.Lock()
	r.retries = append(r.retries, e)
	fn := r.onRetry
	r.rmu.Unlock()
	if fn != nil {
		fn(e)
	}
}

// fakeWaits records the waits between attempts instead of sleeping, with the jitter pinned to its middle.
type fakeWaits struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (w *fakeWaits) tweak(o *ApplyOptions) {
	o.retrySleep = func(ctx context.Context, d time.Duration) error {
		w.mu.Lock()
		w.waits = append(w.waits, d)
		w.mu.Unlock()
		return ctx.Err()
	}
	o.retryRand = func() float64 { return 0.5 }
}

func (f *fixture) attempts(runID string) map[string][]ledger.AttemptRecord {
	f.t.Helper()
	l, err := ledger.Open(statedir.Dir{Root: f.stateDir}.Ledger())
	if err != nil {
		f.t.Fatal(err)
	}
	defer l.Close()
	a, err := l.Attempts(runID)
	if err != nil {
		f.t.Fatal(err)
	}
	return a
}

const retryBlock = `  retry {
    attempts = 3
    backoff  = "1s"
  }
`

// TestRetryAPIError529: an agent that reports API Error: 529 every time runs three times, ends failed, and the
// ledger has its three attempts, each with its own logs, tokens summed on the node.
func TestRetryAPIError529(t *testing.T) {
	f := newFixture(t)
	cfg := f.config(`
node "%[1]sflaky" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  ref    = "main"
  prompt = "mode=apierror"
` + retryBlock + `}
`)
	waits := &fakeWaits{}
	rr := &retryRecorder{recorder: &recorder{}}
	sum, _, err := f.apply(context.Background(), cfg, waits.tweak, func(o *ApplyOptions) { o.Hooks = []Hook{rr} })
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	name := f.node("flaky")
	res := resultOf(t, sum, name)
	if res.Status != ledger.StatusFailed || res.Attempts != 3 {
		t.Fatalf("node: %s after %d attempts (%s), want failed after 3", res.Status, res.Attempts, res.Reason)
	}
	if want := "api_error: HTTP 529 overloaded after 3 attempts"; res.Reason != want {
		t.Errorf("reason %q, want %q", res.Reason, want)
	}
	if res.Totals.InputTokens != 15 || res.Totals.CostUSD == nil || *res.Totals.CostUSD < 0.0029 || *res.Totals.CostUSD > 0.0031 {
		t.Errorf("totals over the attempts: %d input tokens, cost %v; want 15 and 0.003", res.Totals.InputTokens, res.Totals.CostUSD)
	}
	if diff := cmp.Diff([]time.Duration{time.Second, 2 * time.Second}, waits.waits); diff != "" {
		t.Errorf("waits between attempts (-want +got):\n%s", diff)
	}
	if len(rr.retries) != 2 || rr.retries[0].Class != config.RetryOnAPIError || rr.retries[1].NextAttempt != 3 || rr.retries[1].Wait != 2*time.Second {
		t.Errorf("NodeRetry events: %+v", rr.retries)
	}
	got := f.attempts(sum.RunID)[name]
	if len(got) != 3 {
		t.Fatalf("%d attempts recorded, want 3: %+v", len(got), got)
	}
	logs := map[string]bool{}
	for i, a := range got {
		if a.Attempt != i+1 || a.Status != ledger.StatusFailed || a.StopClass != config.RetryOnAPIError ||
			a.StopReason != "api_error: HTTP 529 overloaded" || a.ExitCode == nil || *a.ExitCode != 1 || a.InputTokens != 5 || a.BaseCommit == "" {
			t.Errorf("attempt %d: %+v", i+1, a)
		}
		if wantWait := []time.Duration{time.Second, 2 * time.Second, 0}[i]; a.RetryWait != wantWait {
			t.Errorf("attempt %d: retry wait %s, want %s", i+1, a.RetryWait, wantWait)
		}
		if _, err := os.Stat(a.StdoutLog); err != nil || logs[a.StdoutLog] {
			t.Errorf("attempt %d: stdout log %s missing or shared (%v)", i+1, a.StdoutLog, err)
		}
		logs[a.StdoutLog] = true
	}
	if !strings.HasSuffix(got[1].StdoutLog, name+".a2.stdout.log") {
		t.Errorf("second attempt's log %s, want NODE.a2.stdout.log", got[1].StdoutLog)
	}
	_, nodes := f.ledgerRun(sum.RunID)
	if n := nodes[name]; n.Attempts != 3 || n.InputTokens != 15 || n.Fingerprint == "" {
		t.Errorf("node row: %d attempts, %d input tokens, fingerprint %q", n.Attempts, n.InputTokens, n.Fingerprint)
	}
}

// TestRetryNotOnAgentExit: an agent that simply exits 3 is never retried, whatever the retry block says.
func TestRetryNotOnAgentExit(t *testing.T) {
	f := newFixture(t)
	cfg := f.config(`
node "%[1]sbroken" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  ref    = "main"
  prompt = "mode=fail"
` + retryBlock + `}
`)
	waits := &fakeWaits{}
	sum, _, err := f.apply(context.Background(), cfg, waits.tweak)
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	res := resultOf(t, sum, f.node("broken"))
	if res.Status != ledger.StatusFailed || res.Attempts != 1 || len(waits.waits) != 0 {
		t.Errorf("node: %s after %d attempts, %d waits (%s); want failed after 1, no wait", res.Status, res.Attempts, len(waits.waits), res.Reason)
	}
	if got := f.attempts(sum.RunID)[f.node("broken")]; len(got) != 1 || got[0].StopClass != "" || !strings.Contains(got[0].StopReason, "status 3") {
		t.Errorf("attempts: %+v", got)
	}
}

// TestRetryCancelDuringBackoff: a cancellation during the wait between attempts stops the node at once (the
// backoff is capped at 5 minutes: a test that waited for it would time out).
func TestRetryCancelDuringBackoff(t *testing.T) {
	f := newFixture(t)
	cfg := f.config(`
node "%[1]sflaky" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  ref    = "main"
  prompt = "mode=apierror"
  retry {
    attempts = 3
    backoff  = "1h"
  }
}
`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rr := &retryRecorder{recorder: &recorder{}, onRetry: func(NodeRetryEvent) { cancel() }}
	sum, _, err := f.apply(ctx, cfg, func(o *ApplyOptions) { o.Hooks = []Hook{rr} })
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	res := resultOf(t, sum, f.node("flaky"))
	if res.Status != ledger.StatusCancelled || res.Attempts != 1 || sum.Status != ledger.RunCancelled {
		t.Errorf("node %s after %d attempts, run %s (%s); want cancelled after 1", res.Status, res.Attempts, sum.Status, res.Reason)
	}
	if len(rr.retries) != 1 || rr.retries[0].Wait < config.MaxRetryBackoff*4/5 || rr.retries[0].Wait > config.MaxRetryBackoff {
		t.Errorf("NodeRetry events %+v, want one announcing the capped wait", rr.retries)
	}
	if got := f.attempts(sum.RunID)[f.node("flaky")]; len(got) != 1 {
		t.Errorf("%d attempts recorded, want 1", len(got))
	}
}

// TestResumeAfterFix: a three-node graph whose middle node failed is fixed and applied again with its run
// resumed: the first node is reused (nothing started, its commit fed to the third node as recorded), the other
// two run.
func TestResumeAfterFix(t *testing.T) {
	f := newFixture(t)
	graph := `
node "%%[1]sfirst" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %%[2]q
  ref    = "main"
  branch = "kew/first"
  prompt = "mode=commit\nfile=FIRST.md\ncontent=first"
}
node "%%[1]smiddle" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %%[2]q
  ref    = node.%%[1]sfirst.commit
  prompt = "mode=%s"
}
node "%%[1]slast" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %%[2]q
  ref    = node.%%[1]sfirst.commit
  prompt = "mode=succeed\nafter=${node.%%[1]smiddle.status}"
}
`
	cfg := f.config(fmt.Sprintf(graph, "fail"))
	sum1, _, err := f.apply(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	first1 := resultOf(t, sum1, f.node("first"))
	if first1.Status != ledger.StatusSucceeded || resultOf(t, sum1, f.node("middle")).Status != ledger.StatusFailed ||
		resultOf(t, sum1, f.node("last")).Status != ledger.StatusSkipped {
		t.Fatalf("first run: %+v", sum1.Nodes)
	}

	fixed := f.config(fmt.Sprintf(graph, "succeed"))
	p := f.plan(fixed)
	prev, err := LoadPreviousRun(context.Background(), statedir.Dir{Root: f.stateDir}, ResumeLatest, p, fixed.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if prev.ID != sum1.RunID {
		t.Fatalf("latest run %s, want %s", prev.ID, sum1.RunID)
	}
	render := func(name string, outs map[string]map[string]cty.Value) (*planner.NodePlan, error) {
		np, diags := planner.RenderNode(fixed, planner.Inputs{Vars: map[string]cty.Value{}, FS: config.DirFS(fixed.Dir)}, name, outs)
		if diags.HasErrors() {
			return nil, errors.New(config.DiagnosticsText(diags))
		}
		return np, nil
	}
	rp := planner.Resume(p, prev, render)
	var actions []string
	for _, d := range rp.Decisions {
		actions = append(actions, strings.TrimPrefix(d.Node, f.prefix)+" "+d.Action+": "+d.Reason)
	}
	wantActions := []string{"first reuse: reused from " + sum1.RunID, "middle run: failed in " + sum1.RunID, "last run: upstream " + f.node("middle") + " will run"}
	if diff := cmp.Diff(wantActions, actions); diff != "" {
		t.Fatalf("resume decisions (-want +got):\n%s", diff)
	}

	sum2, rec, err := f.apply(context.Background(), fixed, func(o *ApplyOptions) { o.Plan, o.Resume = p, rp })
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum2.RunID)
	first, middle, last := resultOf(t, sum2, f.node("first")), resultOf(t, sum2, f.node("middle")), resultOf(t, sum2, f.node("last"))
	if first.Status != ledger.StatusReused || first.ReusedFrom != sum1.RunID || first.Commit != first1.Commit {
		t.Errorf("first: %s from %q, commit %s; want reused from %s with commit %s", first.Status, first.ReusedFrom, first.Commit, sum1.RunID, first1.Commit)
	}
	if middle.Status != ledger.StatusSucceeded || last.Status != ledger.StatusSucceeded || sum2.Status != ledger.RunSucceeded {
		t.Fatalf("second run: middle %s (%s), last %s (%s), run %s", middle.Status, middle.Reason, last.Status, last.Reason, sum2.Status)
	}
	if last.BaseCommit != first1.Commit || middle.BaseCommit != first1.Commit {
		t.Errorf("downstream checked out %s and %s, want the recorded commit %s", middle.BaseCommit, last.BaseCommit, first1.Commit)
	}
	for _, s := range rec.starts {
		if s.Node == f.node("first") {
			t.Errorf("the reused node was started: %+v", s)
		}
	}
	if _, err := os.Stat(filepath.Join(f.stateDir, "logs", sum2.RunID, f.node("first")+".stdout.log")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the reused node has a log in the resumed run (%v): something ran", err)
	}
	if a := f.attempts(sum2.RunID); len(a[f.node("first")]) != 0 || len(a[f.node("middle")]) != 1 {
		t.Errorf("attempts in the resumed run: %+v", a)
	}
	run, nodes := f.ledgerRun(sum2.RunID)
	if run.ResumedFrom != sum1.RunID || nodes[f.node("first")].ReusedFrom != sum1.RunID || nodes[f.node("first")].Fingerprint == "" {
		t.Errorf("ledger: run resumed_from %q, first reused_from %q, fingerprint %q", run.ResumedFrom, nodes[f.node("first")].ReusedFrom, nodes[f.node("first")].Fingerprint)
	}

	// Resuming the resumed run reuses everything, and a reused node keeps pointing at the run that made it.
	prev2, err := LoadPreviousRun(context.Background(), statedir.Dir{Root: f.stateDir}, ResumeLatest, p, fixed.Dir)
	if err != nil {
		t.Fatal(err)
	}
	rp2 := planner.Resume(p, prev2, render)
	if d := rp2.Decision(f.node("first")); d == nil || d.Action != planner.ResumeReuse || d.FromRun != sum1.RunID {
		t.Errorf("first on a second resume: %+v", d)
	}
	for _, n := range []string{"middle", "last"} {
		if d := rp2.Decision(f.node(n)); d == nil || d.Action != planner.ResumeReuse || d.FromRun != sum2.RunID {
			t.Errorf("%s on a second resume: %+v", n, d)
		}
	}
}
