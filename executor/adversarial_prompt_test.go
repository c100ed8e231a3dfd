package executor

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/kewplan/kewplan/executor/ledger"
)

// TestApplyRefusesCommittedPrompt: an agent whose git client ignores .git/info/exclude commits the prompt file
// (the fake agent writes git objects itself, as go-git's AddGlob or git add -f would). The broker refuses the
// push: the node is held with a reason naming the file and the commit, and the remote has no branch.
func TestApplyRefusesCommittedPrompt(t *testing.T) {
	f := newFixture(t)
	cfg := f.config(`
node "%[1]sleaky" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  ref    = "main"
  branch = "kew/leaky"
  prompt = "mode=commit\nfile=.kew-prompt.txt\ncontent=the prompt"
}
`)
	sum, _, err := f.apply(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	res := resultOf(t, sum, f.node("leaky"))
	if res.Status != ledger.StatusHeld || res.Pushed ||
		!strings.Contains(res.Reason, "the agent committed the prompt file .kew-prompt.txt in ") ||
		!strings.Contains(res.Reason, "nothing was pushed") {
		t.Errorf("leaky worker: %s (%q), pushed %v", res.Status, res.Reason, res.Pushed)
	}
	if out, err := exec.Command("git", "-C", f.repo, "rev-parse", "--verify", "--quiet", "refs/heads/kew/leaky").Output(); err == nil {
		t.Errorf("remote branch kew/leaky = %s after a refused push, want none", out)
	}
}
