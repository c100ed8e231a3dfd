package executor

// Fan-out in the executor: instances of a for_each node run under their addresses (fix["api"]) in
// results, the ledger and hooks, while every path apply derives uses the instance's slug.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/statedir"
)

// TestApplyForEachInstances applies a for_each node over three keys, one of them hostile ("../x"): each instance
// runs in its own container, pushes its own branch, and is recorded under its address; every file apply made is
// inside the state directory, named by slug.
func TestApplyForEachInstances(t *testing.T) {
	f := newFixture(t)
	cfg := f.config(`
node "%[1]sfix" {
  for_each = toset(["api", "web", "../x"])
  runner   = "claude-code"
  model    = "claude-sonnet-4-5"
  repo     = %[2]q
  ref      = "main"
  prompt   = "mode=commit\nfile=FIX.md\ncontent=fixed ${each.key}"
}
`)
	plan := f.plan(cfg)
	if len(plan.Nodes) != 3 {
		t.Fatalf("the plan has %d nodes, want 3 instances", len(plan.Nodes))
	}
	sum, _, err := f.apply(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	_, recorded := f.ledgerRun(sum.RunID)
	branches := map[string]bool{}
	for _, key := range []string{"api", "web", "../x"} {
		addr := f.node("fix") + `["` + key + `"]`
		np := plan.Node(addr)
		if np == nil {
			t.Fatalf("no instance %s in the plan", addr)
		}
		res := resultOf(t, sum, addr)
		if res.Status != ledger.StatusSucceeded || !res.Pushed {
			t.Errorf("%s: %s (%s), pushed %v", addr, res.Status, res.Reason, res.Pushed)
			continue
		}
		if res.Branch != np.Branch || branches[res.Branch] {
			t.Errorf("%s pushed branch %q, planned %q (branches so far %v)", addr, res.Branch, np.Branch, branches)
		}
		branches[res.Branch] = true
		out, err := exec.Command("git", "-C", f.repo, "show", "refs/heads/"+res.Branch+":FIX.md").Output()
		if err != nil || strings.TrimSpace(string(out)) != "fixed "+key {
			t.Errorf("%s: branch %s holds FIX.md %q (%v), want %q", addr, res.Branch, out, err, "fixed "+key)
		}
		if rec, ok := recorded[addr]; !ok || rec.Status != ledger.StatusSucceeded {
			t.Errorf("the ledger has no succeeded row for the address %s: %+v", addr, recorded)
		}
		for _, p := range []string{res.StdoutLog, res.StderrLog} {
			want := filepath.Join(f.stateDir, "logs", sum.RunID, np.Slug)
			if !strings.HasPrefix(p, want+".") {
				t.Errorf("%s: log %s is not named by the slug %s", addr, p, np.Slug)
			}
		}
	}
	// Nothing outside the state directory; nothing inside it named after an address.
	entries, err := os.ReadDir(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "main.hcl" && e.Name() != statedir.DefaultName {
			t.Errorf("apply made %s beside the state directory", e.Name())
		}
	}
	_ = filepath.Walk(f.stateDir, func(p string, info os.FileInfo, err error) error {
		if err == nil && strings.ContainsAny(info.Name(), `"[]`) {
			t.Errorf("a path is named after an instance address: %s", p)
		}
		return nil
	})
}
