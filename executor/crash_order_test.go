package executor

// Write before act: every state transition is in the ledger before the apply does what it records, so that an
// apply killed between the two leaves a record the next command can act on. An engine stand-in reads the ledger
// (as a second process would) at each step the apply hands it.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/executor/adapter"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/planner"
)

// orderEngine is an engine that starts nothing: at each step it reads what the ledger holds and notes what is
// missing. startErr makes Start fail.
type orderEngine struct {
	ledger   string
	startErr error
	problems []string
	base     string
}

func (e *orderEngine) note(format string, args ...any) {
	e.problems = append(e.problems, fmt.Sprintf(format, args...))
}

// read opens the ledger read-only, as `kewplan runs` beside a live apply does.
func (e *orderEngine) read(runID string) (*ledger.RunRecord, map[string]ledger.NodeRecord) {
	l, err := ledger.OpenReadOnly(e.ledger)
	if err != nil {
		e.note("the ledger does not open: %v", err)
		return nil, nil
	}
	defer l.Close()
	run, nodes, err := l.Run(runID)
	if err != nil {
		e.note("run %s is not recorded: %v", runID, err)
		return nil, nil
	}
	byName := map[string]ledger.NodeRecord{}
	for _, n := range nodes {
		byName[n.Node] = n
	}
	return run, byName
}

func (e *orderEngine) Preflight(context.Context, *adapter.Run) (problems, warnings []string) {
	return nil, nil
}
func (e *orderEngine) Sweep(context.Context, *adapter.Run) {}
func (e *orderEngine) End(context.Context, *adapter.Run)   {}
func (e *orderEngine) Abort(context.Context) []error       { return nil }
func (e *orderEngine) Close() error                        { return nil }

func (e *orderEngine) Start(_ context.Context, run *adapter.Run) error {
	if r, _ := e.read(run.ID); r != nil && r.Status != ledger.RunRunning {
		e.note("run %s is recorded %s when its engine starts, want running", run.ID, r.Status)
	}
	return e.startErr
}

func (e *orderEngine) Attempt(ctx context.Context, at *adapter.Attempt) *adapter.Failure {
	name, runID := at.Node.Name, at.Result.RunID
	if _, nodes := e.read(runID); nodes != nil {
		if n, ok := nodes[name]; !ok || n.Status != ledger.StatusRunning {
			e.note("node %s is recorded %q when its checkout is made, want running", name, n.Status)
		}
	}
	if err := os.MkdirAll(at.Checkout, 0o700); err != nil {
		return adapter.Failed(ledger.StatusFailed, err.Error())
	}
	at.Result.BaseCommit, at.Result.Repo = e.base, at.Node.Repo
	if f := at.TakeSlot(ctx); f != nil {
		return f
	}
	if _, nodes := e.read(runID); nodes != nil {
		if n := nodes[name]; n.BaseCommit != e.base || n.Repo != at.Node.Repo || n.Slug == "" {
			e.note("node %s's checkout is not recorded when its agent would start: base %q, repo %q, slug %q", name, n.BaseCommit, n.Repo, n.Slug)
		}
	}
	at.Result.Commit, at.Result.Branch, at.Result.Pushed = e.base, at.Node.Branch, true
	at.Result.Status = ledger.StatusSucceeded
	return nil
}

func orderConfig(t *testing.T) *config.Config {
	t.Helper()
	dir := t.TempDir()
	src := `sandbox {
  images = { "claude-code" = "kewplan-test/none:1" }
}

node "one" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://git.invalid/one.git"
  prompt = "do one thing"
}

node "two" {
  runner     = "claude-code"
  model      = "claude-sonnet-4-5"
  repo       = "https://git.invalid/two.git"
  prompt     = "do another"
  depends_on = [node.one]
}
`
	path := filepath.Join(dir, "main.hcl")
	must(t, os.WriteFile(path, []byte(src), 0o644))
	cfg, diags := config.Load(path)
	if diags.HasErrors() {
		t.Fatal(config.DiagnosticsText(diags))
	}
	return cfg
}

func orderApply(t *testing.T, e *orderEngine) (*ApplySummary, error) {
	t.Helper()
	cfg := orderConfig(t)
	plan, diags := planner.Build(cfg, planner.Inputs{Vars: map[string]cty.Value{}, FS: config.DirFS(cfg.Dir)})
	if diags.HasErrors() {
		t.Fatal(config.DiagnosticsText(diags))
	}
	stateDir := filepath.Join(t.TempDir(), "state")
	e.ledger = filepath.Join(stateDir, "dispatch.db")
	return Apply(context.Background(), ApplyOptions{Config: cfg, Vars: map[string]cty.Value{}, Plan: plan, StateDir: stateDir,
		Engine: e, KewplanVersion: "test", ProgressInterval: time.Millisecond})
}

// TestApplyWritesBeforeActing: the run is recorded running before its engine starts anything, a node's row before
// its checkout is made, and its repository and base commit before its agent starts.
func TestApplyWritesBeforeActing(t *testing.T) {
	e := &orderEngine{base: "0123456789abcdef0123456789abcdef01234567"}
	sum, err := orderApply(t, e)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Status != ledger.RunSucceeded {
		t.Errorf("the run ended %s, want succeeded", sum.Status)
	}
	for _, p := range e.problems {
		t.Error(p)
	}
}

// TestApplyEngineStartFailsLeavesNoRun: a run whose engine could not start is not kept in the ledger, though it
// was recorded before the engine was asked.
func TestApplyEngineStartFailsLeavesNoRun(t *testing.T) {
	e := &orderEngine{startErr: errors.New("the egress proxy did not start")}
	_, err := orderApply(t, e)
	var pe *PreflightError
	if !errors.As(err, &pe) {
		t.Fatalf("Apply() = %v, want a PreflightError", err)
	}
	for _, p := range e.problems {
		t.Error(p)
	}
	l, err := ledger.OpenReadOnly(e.ledger)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	runs, err := l.Runs()
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 0 {
		t.Errorf("the ledger keeps %d runs after the engine failed to start, want none: %+v", len(runs), runs)
	}
}
