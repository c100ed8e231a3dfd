//go:build linux

package executor

// Fault injection during a push: kewplan apply is killed with SIGKILL while the origin's pre-receive hook holds
// the push of a worker without resume_from_salvage; the hook then lets the push land (or refuses it), and the next
// commands are checked against the real engine and that origin.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/statedir"
)

// pushKillNodes is a worker without resume_from_salvage (fix) and a worker that starts from fix's commit (dep).
const pushKillNodes = `
node "%[1]sfix" {
  runner  = "claude-code"
  model   = "claude-sonnet-4-5"
  repo    = %[2]q
  prompt  = "commits=1\nmode=succeed"
  timeout = "5m"
}

node "%[1]sdep" {
  runner  = "claude-code"
  model   = "claude-sonnet-4-5"
  repo    = %[2]q
  ref     = node.%[1]sfix.commit
  prompt  = "commits=1\nmode=succeed"
  timeout = "5m"
}
`

// killDuringPush runs apply on pushKillNodes with the origin holding fix's push, kills kewplan while the hook
// holds it, then answers the hook ("go" or "reject") and waits for the origin's receive-pack to exit. It returns
// the run's id.
func killDuringPush(t *testing.T, f *fixture, origin *crashOrigin, env []string, answer string) string {
	t.Helper()
	must(t, os.WriteFile(origin.hold, []byte("/kew/"+f.node("fix")), 0o600))
	// Opened read-write, the FIFO never blocks the open; the hook's line is read when it comes.
	fifo, err := os.OpenFile(origin.held, os.O_RDWR, 0)
	must(t, err)
	t.Cleanup(func() { fifo.Close() })
	held := make(chan int, 1)
	go func() {
		line, err := bufio.NewReader(fifo).ReadString('\n')
		if pid, perr := strconv.Atoi(strings.TrimSpace(line)); err == nil && perr == nil {
			held <- pid
		}
	}()
	r := startKewplan(t, env, "apply", f.dir, "--auto-approve", "--json", "--state-dir", f.stateDir)
	var runID string
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(r.stdout)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			var ev applyEvent
			if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Type == "apply_start" {
				runID = ev.RunID
			}
		}
		io.Copy(io.Discard, r.stdout)
	}()
	var pid int
	select {
	case pid = <-held:
	case <-read:
		r.wait()
		t.Fatalf("the apply ended before the origin held fix's push: %s", r.stderr.String())
	case <-time.After(3 * time.Minute): // a backstop only: the hook's line is the event waited for
		t.Fatalf("the origin's hook never held fix's push: %s", r.stderr.String())
	}
	must(t, r.cmd.Process.Signal(syscall.SIGKILL))
	r.wait()
	<-read
	answerPush(t, origin, pid, answer)
	if runID == "" {
		t.Fatal("the apply was killed before it said its run id")
	}
	return runID
}

// showRun is `kewplan runs show RUN --json`, nodes by name.
func showRun(t *testing.T, env []string, f *fixture, runID string) map[string]ledger.NodeRecord {
	t.Helper()
	out, stderr, code := runKewplan(t, env, "runs", "show", runID, "--json", "--state-dir", f.stateDir)
	if code != 0 {
		t.Fatalf("kewplan runs show exited %d: %s", code, stderr)
	}
	var doc struct{ Nodes []ledger.NodeRecord }
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("kewplan runs show --json: %v\n%s", err, out)
	}
	byName := map[string]ledger.NodeRecord{}
	for _, n := range doc.Nodes {
		byName[n.Node] = n
	}
	return byName
}

// resumeLatest runs apply --resume latest (with extra arguments), checks that it succeeded, resumed run from and
// left nothing behind, and returns the resumed run's nodes.
func resumeLatest(t *testing.T, env []string, f *fixture, from string, extra ...string) map[string]ledger.NodeRecord {
	t.Helper()
	args := append([]string{"apply", f.dir, "--resume", "latest", "--auto-approve", "--json", "--state-dir", f.stateDir}, extra...)
	out, stderr, code := runKewplan(t, env, args...)
	var resumed string
	for _, line := range strings.Split(out, "\n") {
		var ev applyEvent
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Type == "apply_start" {
			resumed = ev.RunID
		}
	}
	if code != 0 || resumed == "" {
		t.Fatalf("apply --resume latest exited %d (run %q): %s\n%s", code, resumed, stderr, out)
	}
	run, nodes := f.ledgerRun(resumed)
	if run.Status != ledger.RunSucceeded || run.ResumedFrom != from {
		t.Errorf("the resumed run is %s, resumed from %q (want succeeded, from %s)", run.Status, run.ResumedFrom, from)
	}
	f.assertClean(resumed)
	return nodes
}

// TestAdvKilledDuringPush (F21, F22): SIGKILL of kewplan apply while the origin holds the push of a worker
// without resume_from_salvage. When the push then lands, the next command finds the push intent the apply wrote
// ahead, asks the origin, and records the node as pushed with the commit the origin holds; apply --resume latest
// reuses it and its dependant starts from that commit. When the origin refuses the push, the node stays
// interrupted and the resume runs it again.
func TestAdvKilledDuringPush(t *testing.T) {
	base := newFixture(t)
	kewplanBin(t) // built once, before the kills
	env := append(baseEnv(), "ANTHROPIC_API_KEY=sk-crash-dummy")
	setup := func(t *testing.T) (*fixture, *crashOrigin) {
		f := *base
		f.t, f.dir, f.prefix = t, t.TempDir(), "t"+randomSuffix()+"-"
		f.stateDir = filepath.Join(f.dir, statedir.DefaultName)
		origin := newCrashOrigin(t, f.dir, base.repo)
		f.repo = origin.git
		f.config(pushKillNodes)
		return &f, origin
	}

	t.Run("landed", func(t *testing.T) {
		f21 := adv(t, "F21", "SIGKILL to kewplan apply after a worker's push landed on the origin and before its outcome was recorded (no resume_from_salvage)",
			"the next command asks the origin about the push intent written ahead, records the node as pushed with the origin's commit, and apply --resume latest reuses it and completes the graph")
		f, origin := setup(t)
		runID := killDuringPush(t, f, origin, env, "go")
		branch := "kew/" + f.node("fix")
		landed := origin.head("refs/heads/" + branch)
		f21.check(landed != "", "live control: the held push landed on the origin after the kill (%s holds %q)", branch, landed)

		out, stderr, code := runKewplan(t, env, "runs", "--json", "--state-dir", f.stateDir)
		f21.check(code == 0, "kewplan runs exited %d%s", code, onFailure(code, stderr))
		want := fmt.Sprintf("the push of %s to %s had landed before apply died; recorded as pushed", f.node("fix"), branch)
		f21.check(strings.Contains(stderr, want), "kewplan runs says %q:\n%s", want, stderr)
		f21.check(strings.Contains(out, `"`+runID+`"`), "kewplan runs --json lists the killed run")
		fix := showRun(t, env, f, runID)[f.node("fix")]
		f21.check(fix.Status == ledger.StatusSucceeded && fix.Pushed && fix.Commit == landed && fix.Branch == branch,
			"runs show --json records fix %s, pushed %v, commit %s to %s (want succeeded, pushed, %s to %s): %s",
			fix.Status, fix.Pushed, fix.Commit, fix.Branch, landed, branch, fix.Reason)

		nodes := resumeLatest(t, env, f, runID)
		fix2, dep := nodes[f.node("fix")], nodes[f.node("dep")]
		f21.check(fix2.Status == ledger.StatusReused && fix2.ReusedFrom == runID && fix2.Commit == landed,
			"the resume reuses fix: %s from %q, commit %s", fix2.Status, fix2.ReusedFrom, fix2.Commit)
		f21.check(dep.Status == ledger.StatusSucceeded && dep.Pushed && dep.BaseCommit == landed,
			"dep runs from fix's landed commit and pushes: %s, pushed %v, base %s (%s)", dep.Status, dep.Pushed, dep.BaseCommit, dep.Reason)
	})

	t.Run("rejected", func(t *testing.T) {
		f22 := adv(t, "F22", "SIGKILL to kewplan apply during a worker's push that the origin then refuses (no resume_from_salvage)",
			"the next command finds the origin's branch without the intended commit and leaves the node interrupted; apply --resume latest runs it again and completes the graph")
		f, origin := setup(t)
		runID := killDuringPush(t, f, origin, env, "reject")
		branch := "kew/" + f.node("fix")
		f22.check(origin.head("refs/heads/"+branch) == "", "live control: the origin refused the held push (%s holds %q)", branch, origin.head("refs/heads/"+branch))

		_, stderr, code := runKewplan(t, env, "runs", "--json", "--state-dir", f.stateDir)
		f22.check(code == 0, "kewplan runs exited %d%s", code, onFailure(code, stderr))
		want := fmt.Sprintf("the push of %s to %s had not landed before apply died (the remote holds no such branch", f.node("fix"), branch)
		f22.check(strings.Contains(stderr, want), "kewplan runs says %q:\n%s", want, stderr)
		fix := showRun(t, env, f, runID)[f.node("fix")]
		f22.check(fix.Status == ledger.StatusInterrupted && !fix.Pushed, "runs show --json records fix %s, pushed %v (want interrupted, not pushed)", fix.Status, fix.Pushed)

		nodes := resumeLatest(t, env, f, runID)
		fix2, dep := nodes[f.node("fix")], nodes[f.node("dep")]
		pushed := origin.head("refs/heads/" + branch)
		f22.check(fix2.Status == ledger.StatusSucceeded && fix2.Pushed && fix2.Commit == pushed,
			"the resume runs fix again and pushes: %s, pushed %v, commit %s (origin %s): %s", fix2.Status, fix2.Pushed, fix2.Commit, pushed, fix2.Reason)
		f22.check(dep.Status == ledger.StatusSucceeded && dep.BaseCommit == fix2.Commit, "dep runs from fix's new commit: %s, base %s", dep.Status, dep.BaseCommit)
	})
}
