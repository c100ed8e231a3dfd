//go:build linux

package executor

// Fault injection: kewplan apply, run as a child process, is killed with SIGKILL while a worker that has already
// committed still runs; the next commands (runs, logs, salvage, apply --resume) are checked against the real
// engine and a throwaway origin repository.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/statedir"
	"github.com/kewplan/kewplan/planner"
)

// crashNodes is a worker that commits twice, leaves an edit and then blocks until it is killed (fix), beside one
// that succeeds at once (docs). The fix prompt is the argument.
const crashNodes = `
node "%%[1]sdocs" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %%[2]q
  prompt = "mode=succeed"
}

node "%%[1]sfix" {
  runner              = "claude-code"
  model               = "claude-sonnet-4-5"
  repo                = %%[2]q
  prompt              = %q
  timeout             = "10m"
  resume_from_salvage = true
}
`

// killApplyMidNode starts kewplan apply on crashNodes and kills it with SIGKILL once docs has succeeded and fix's
// agent has committed and runs; it returns the run's id.
func killApplyMidNode(t *testing.T, f *fixture, env []string) string {
	t.Helper()
	f.config(fmt.Sprintf(crashNodes, "commits=2\nedit=README.md:edited by the agent\nmode=hang"))
	r := startKewplan(t, env, "apply", f.dir, "--auto-approve", "--json", "--state-dir", f.stateDir)
	sc := bufio.NewScanner(r.stdout)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	runID, docsDone, fixRuns := "", false, false
	for !(docsDone && fixRuns) && sc.Scan() {
		var ev map[string]any
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		switch ev["type"] {
		case "apply_start":
			runID, _ = ev["run_id"].(string)
		case "node_done":
			if ev["node"] == f.node("docs") {
				if ev["status"] != ledger.StatusSucceeded {
					t.Fatalf("docs ended %v before the kill: %s", ev["status"], sc.Bytes())
				}
				docsDone = true
			}
		case "node_progress":
			// The init event was metered: the agent made its commits and its edit, and blocks.
			if ev["node"] == f.node("fix") && ev["session_id"] != nil && ev["session_id"] != "" {
				fixRuns = true
			}
		}
	}
	if !(docsDone && fixRuns) {
		t.Fatalf("the apply ended before the kill point (docs done %v, fix running %v): %s", docsDone, fixRuns, r.stderr.String())
	}
	go io.Copy(io.Discard, r.stdout)
	must(t, r.cmd.Process.Signal(syscall.SIGKILL))
	r.wait()
	return runID
}

// TestAdvKilledApplyKeepsWork (F12, F13): SIGKILL of kewplan apply while a worker that committed still runs. The
// next command (runs) marks the run and the node interrupted, stops the orphan container, keeps its commits and
// its edit, and removes the container and the checkout; logs says interrupted; salvage publishes the kept work;
// apply --resume latest reuses the node that had succeeded and runs the interrupted one again from its kept work.
func TestAdvKilledApplyKeepsWork(t *testing.T) {
	f12 := adv(t, "F12", "SIGKILL to kewplan apply while a worker that has committed still runs, then kewplan runs",
		"the run and the node are marked interrupted as of the last thing recorded; the orphan container is stopped, the commits and the uncommitted edit kept, then the container and the checkout removed; salvage publishes the work")
	f13 := adv(t, "F13", "kewplan apply --resume latest after a SIGKILLed apply",
		"the interrupted run is resumed: the node that had succeeded is reused, the interrupted one runs again from its kept work")
	f := newFixture(t)
	remote := f.bareRemote()
	env := append(baseEnv(), "ANTHROPIC_API_KEY=sk-crash-dummy")
	ctx := context.Background()

	runID := killApplyMidNode(t, f, env)
	left, err := f.eng.ListContainers(ctx, planner.LabelRun+"="+runID)
	agents := 0
	for _, c := range left {
		if c.Labels[planner.LabelNode] == f.node("fix") && c.State == "running" {
			agents++
		}
	}
	f12.check(err == nil && agents == 1, "live control: the killed apply left fix's container running (%d)", agents)
	t.Cleanup(func() {
		for _, c := range left {
			_ = f.eng.ForceRemove(c.ID)
		}
	})

	out, stderr, code := runKewplan(t, env, "runs", "--json", "--state-dir", f.stateDir)
	f12.check(code == 0 && strings.Contains(out, `"interrupted"`), "kewplan runs exited %d and lists the run interrupted%s", code, onFailure(code, stderr))
	for _, want := range []string{"run " + runID + " was interrupted", "stopped container", "kept 2 commits, 1 file changed, ", "of interrupted node " + f.node("fix")} {
		f12.check(strings.Contains(stderr, want), "kewplan runs says %q", want)
	}
	left, err = f.eng.ListContainers(ctx, planner.LabelRun+"="+runID)
	f12.check(err == nil && len(left) == 0, "no container of the killed run survives kewplan runs (%d left)", len(left))
	dir := statedir.Dir{Root: f.stateDir}
	_, statErr := os.Stat(dir.RunCheckouts(runID))
	f12.check(os.IsNotExist(statErr), "the killed run's checkouts are removed after its work was kept: %v", statErr)
	f12.check(len(promptFilesUnder(f.stateDir)) == 0, "no prompt file is left: %v", promptFilesUnder(f.stateDir))

	run, nodes := f.ledgerRun(runID)
	fix, docs := nodes[f.node("fix")], nodes[f.node("docs")]
	f12.check(run.Status == ledger.RunInterrupted && run.EndedAt != nil, "the run is recorded %s (ended %v)", run.Status, run.EndedAt)
	f12.check(fix.Status == ledger.StatusInterrupted && fix.EndedAt != nil && strings.Contains(fix.Reason, "last recorded at"),
		"fix is recorded %s: %s", fix.Status, fix.Reason)
	f12.check(docs.Status == ledger.StatusSucceeded, "docs keeps its outcome: %s", docs.Status)
	s := fix.Salvage
	f12.check(s != nil && s.Commits == 2 && s.FilesChanged == 1 && s.Worktree != "", "fix's work is kept: %+v", s)
	if s == nil {
		t.FailNow()
	}

	out, _, code = runKewplan(t, env, "logs", runID, f.node("fix"), "--state-dir", f.stateDir, "--no-pager")
	f12.check(code == 0 && strings.Contains(out, "interrupted") && strings.Contains(out, "last recorded at"), "kewplan logs says interrupted and since when%s", onFailure(code, out))

	out, stderr, code = runKewplan(t, env, "salvage", runID, f.node("fix"), "--json", "--state-dir", f.stateDir)
	f12.check(code == 0, "kewplan salvage exited %d%s", code, onFailure(code, stderr))
	var published struct{ Branch, Commit string }
	_ = json.Unmarshal([]byte(out), &published)
	if published.Branch != "" {
		revs := strings.Fields(gitOut(t, "--git-dir="+remote, "rev-list", s.BaseCommit+".."+published.Branch))
		f12.check(len(revs) == 3 && revs[0] == s.Worktree && revs[1] == s.Head, "the salvage branch %s holds the edit's commit on the agent's two: %v", published.Branch, revs)
	} else {
		f12.check(false, "kewplan salvage published no branch: %s", out)
	}

	// The resume: fix now succeeds; docs has the same inputs.
	f.config(fmt.Sprintf(crashNodes, "mode=succeed"))
	out, stderr, code = runKewplan(t, env, "apply", f.dir, "--resume", "latest", "--auto-approve", "--json", "--state-dir", f.stateDir)
	f13.check(code == 0, "apply --resume latest exited %d%s", code, onFailure(code, stderr))
	var resumed string
	for _, line := range strings.Split(out, "\n") {
		var ev map[string]any
		if json.Unmarshal([]byte(line), &ev) == nil && ev["type"] == "apply_start" {
			resumed, _ = ev["run_id"].(string)
		}
	}
	if resumed == "" {
		t.Fatalf("apply --resume started no run:\n%s\n%s", out, stderr)
	}
	run2, nodes2 := f.ledgerRun(resumed)
	f13.check(run2.ResumedFrom == runID && run2.Status == ledger.RunSucceeded, "the resumed run %s resumed %q", run2.Status, run2.ResumedFrom)
	f13.check(nodes2[f.node("docs")].Status == ledger.StatusReused && nodes2[f.node("docs")].ReusedFrom == runID, "docs is reused: %s from %q",
		nodes2[f.node("docs")].Status, nodes2[f.node("docs")].ReusedFrom)
	fix2 := nodes2[f.node("fix")]
	f13.check(fix2.Status == ledger.StatusSucceeded && fix2.Pushed, "fix runs again and pushes: %s (%s)", fix2.Status, fix2.Reason)
	if fix2.Pushed {
		revs := strings.Fields(gitOut(t, "--git-dir="+remote, "rev-list", s.BaseCommit+".."+fix2.Branch))
		f13.check(len(revs) == 3 && revs[1] == s.Head, "fix's push carries the kept commits: %v (kept head %s)", revs, s.Head)
	}
	f13.check(strings.Contains(out, "starts from the work kept in run "+runID), "the resumed apply says fix starts from the kept work")
	f.assertClean(resumed)
}

// onFailure is ": text" when code is not 0, for a check's message; "" otherwise.
func onFailure(code int, text string) string {
	if code == 0 {
		return ""
	}
	return ": " + text
}
