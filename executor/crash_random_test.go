//go:build linux

package executor

// Fault injection at random moments: kewplan apply of a four-node graph, run as a child process, is killed with
// SIGKILL at moments drawn from a seeded generator across its phases (clone, container start, streaming, push,
// verdict collection, ledger write); after each kill the next commands are checked against the real engine and a
// throwaway origin repository whose pre-receive hook can hold a push.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/statedir"
	"github.com/kewplan/kewplan/planner"
)

// randomKillNodes: two workers that commit (w1 also leaves an edit) and push, a reviewer of w1's commit that
// writes its verdict and pauses before it exits, and a worker that depends on w2 and the reviewer. Written for
// fixture.config: %[1]s is the node prefix, %[2]q the repository.
const randomKillNodes = `
node "%[1]sw1" {
  runner              = "claude-code"
  model               = "claude-sonnet-4-5"
  repo                = %[2]q
  prompt              = "commits=2\nedit=NOTES.md:edited by w1\nmode=turns\nturns=7\ngap=200ms"
  timeout             = "5m"
  resume_from_salvage = true
}

node "%[1]sw2" {
  runner              = "claude-code"
  model               = "claude-sonnet-4-5"
  repo                = %[2]q
  prompt              = "commits=1\nmode=turns\nturns=6\ngap=250ms"
  timeout             = "5m"
  resume_from_salvage = true
}

node "%[1]srev" {
  runner  = "claude-code"
  role    = "reviewer"
  model   = "claude-sonnet-4-5"
  repo    = %[2]q
  ref     = node.%[1]sw1.commit
  prompt  = "mode=verdict\nverdict=approve\nsleep=700ms"
  timeout = "5m"
}

node "%[1]sdep" {
  runner              = "claude-code"
  model               = "claude-sonnet-4-5"
  repo                = %[2]q
  prompt              = "commits=1\nmode=succeed"
  timeout             = "5m"
  resume_from_salvage = true
  depends_on          = [node.%[1]sw2, node.%[1]srev]
}
`

// randomKillWorkers are the nodes of randomKillNodes that commit and push.
var randomKillWorkers = []string{"w1", "w2", "dep"}

// The phases a kill is aimed at.
const (
	phaseClone   = "clone"   // a node's clone: at the apply's start (w1, w2) or as soon as w1 ended (rev)
	phaseStart   = "start"   // a node's container being created and started: at its node_start
	phaseStream  = "stream"  // a worker's output being streamed: at its n-th node_progress
	phasePush    = "push"    // a worker's push: while the origin's pre-receive hook holds it
	phaseVerdict = "verdict" // the reviewer's verdict collection: at its last output, before its node_done
	phaseLedger  = "ledger"  // a node's outcome just written: at its node_done, where the next rows are written
)

var killPhases = []string{phaseClone, phaseStart, phaseStream, phasePush, phaseVerdict, phaseLedger}

// killPoint is one moment to kill the apply at: a phase, the node whose event triggers it, which occurrence of
// that event (stream), and a jitter of up to a few milliseconds after the trigger, so that a kill lands anywhere
// in the phase's window rather than always at its first instruction.
type killPoint struct {
	Phase  string
	Node   string
	Nth    int
	Jitter time.Duration
}

func (k killPoint) String() string {
	s := k.Phase + "-" + k.Node
	if k.Nth > 0 {
		s += "-" + strconv.Itoa(k.Nth)
	}
	return fmt.Sprintf("%s+%dms", s, k.Jitter.Milliseconds())
}

// killPoints draws n kill points from seed, every phase in turn so that each gets its share.
func killPoints(seed uint64, n int) []killPoint {
	rng := rand.New(rand.NewPCG(seed, seed^0x6b6577706c616e))
	pick := func(s ...string) string { return s[rng.IntN(len(s))] }
	out := make([]killPoint, n)
	for i := range out {
		k := killPoint{Phase: killPhases[i%len(killPhases)], Jitter: time.Duration(rng.IntN(40)) * time.Millisecond}
		switch k.Phase {
		case phaseClone:
			k.Node = pick("w1", "w2", "rev")
		case phaseStart:
			k.Node = pick("w1", "w2", "rev", "dep")
		case phaseStream:
			k.Node, k.Nth = pick("w1", "w2"), 1+rng.IntN(3)
		case phasePush:
			k.Node, k.Jitter = pick(randomKillWorkers...), 0
		case phaseVerdict:
			k.Node, k.Jitter = "rev", time.Duration(rng.IntN(200))*time.Millisecond
		case phaseLedger:
			k.Node = pick("w1", "w2", "rev", "dep")
		}
		out[i] = k
	}
	return out
}

// TestAdvKillAtRandomMoments (F14): SIGKILL of kewplan apply at 20 moments drawn from a seeded generator
// (KEWPLAN_CRASH_SEED sets the seed; -short draws 6) across a four-node apply. After each kill the ledger opens
// and lists the run; the next command (runs) leaves no run running and no container of the apply; every commit a
// worker made before the kill is on the origin, pushed by the apply or published from what was kept (kewplan
// salvage); and apply --resume latest completes the graph.
func TestAdvKillAtRandomMoments(t *testing.T) {
	f14 := adv(t, "F14", "SIGKILL to kewplan apply at 20 random moments of a four-node apply (clone, container start, streaming, push, verdict collection, ledger write)",
		"after each kill: the ledger opens, no run reads running after the next command, no container of the apply survives it, every commit made before the kill is pushed or salvageable, and apply --resume latest completes the graph")
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("KEWPLAN_CRASH_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("KEWPLAN_CRASH_SEED=%q is not an unsigned integer", s)
		}
		seed = v
	}
	n := 20
	if testing.Short() {
		n = 6
	}
	points := killPoints(seed, n)
	t.Logf("crash seed %d (rerun with KEWPLAN_CRASH_SEED=%d): %v", seed, seed, points)
	base := newFixture(t)
	kewplanBin(t) // built once, before the first kill

	survived := 0
	for i, kp := range points {
		if t.Run(fmt.Sprintf("kill%02d-%s", i+1, kp), func(t *testing.T) { killAndRecover(t, base, kp) }) {
			survived++
		}
	}
	fmt.Printf("TestAdvKillAtRandomMoments: survived %d/%d kills (seed %d)\n", survived, n, seed)
	t.Logf("survived %d/%d kills (seed %d)", survived, n, seed)
	f14.check(survived == n, "survived %d/%d kills (seed %d)", survived, n, seed)
}

// crashOrigin is a bare origin repository whose pre-receive hook holds the push of one branch when asked: it
// names its receive-pack's pid on held, then waits for a line on release: "reject" refuses the push, any other
// lets it land.
type crashOrigin struct {
	git, hold, held, release string
}

func newCrashOrigin(t *testing.T, dir, source string) *crashOrigin {
	t.Helper()
	o := &crashOrigin{git: filepath.Join(dir, "origin.git"), hold: filepath.Join(dir, "hold"),
		held: filepath.Join(dir, "held.fifo"), release: filepath.Join(dir, "release.fifo")}
	if out, err := exec.Command("git", "clone", "--quiet", "--bare", source, o.git).CombinedOutput(); err != nil {
		t.Fatalf("git clone --bare: %v\n%s", err, out)
	}
	for _, p := range []string{o.held, o.release} {
		must(t, syscall.Mkfifo(p, 0o600))
	}
	hook := fmt.Sprintf(`#!/bin/sh
# Holds the push of the branch ending in the text of %[1]s (once), for a test that kills kewplan meanwhile.
target=$(cat %[1]q 2>/dev/null)
while read -r old new ref; do
  if [ -n "$target" ]; then
    case "$ref" in
      *"$target")
        rm -f %[1]q
        echo "$PPID" > %[2]q
        read -r go < %[3]q
        if [ "$go" = reject ]; then exit 1; fi
        ;;
    esac
  fi
done
exit 0
`, o.hold, o.held, o.release)
	must(t, os.WriteFile(filepath.Join(o.git, "hooks", "pre-receive"), []byte(hook), 0o755))
	return o
}

// contains reports whether a ref of the origin contains commit.
func (o *crashOrigin) contains(commit string) bool {
	out, err := exec.Command("git", "--git-dir="+o.git, "for-each-ref", "--contains", commit, "--format=%(refname)").Output()
	return err == nil && strings.TrimSpace(string(out)) != ""
}

func (o *crashOrigin) head(ref string) string {
	out, err := exec.Command("git", "--git-dir="+o.git, "rev-parse", "--verify", "--quiet", ref).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// applyEvent is one line of apply --json.
type applyEvent struct {
	Type   string `json:"type"`
	RunID  string `json:"run_id"`
	Node   string `json:"node"`
	Status string `json:"status"`
}

// killAndRecover runs one apply of randomKillNodes in a fresh state directory and origin, kills it at kp, and
// checks what the next commands make of it.
func killAndRecover(t *testing.T, base *fixture, kp killPoint) {
	f := *base
	f.t, f.dir, f.prefix = t, t.TempDir(), "t"+randomSuffix()+"-"
	f.stateDir = filepath.Join(f.dir, statedir.DefaultName)
	origin := newCrashOrigin(t, f.dir, base.repo)
	f.repo = origin.git
	mainHead := origin.head("refs/heads/main")
	if mainHead == "" {
		t.Fatal("the origin has no main branch")
	}
	f.config(randomKillNodes)
	env := append(baseEnv(), "ANTHROPIC_API_KEY=sk-crash-dummy")
	ctx := context.Background()

	runID := killApplyAt(t, &f, origin, env, kp)
	if runID == "" {
		t.Fatalf("the apply was killed before it said its run id")
	}
	dir := statedir.Dir{Root: f.stateDir}

	// What each worker had committed when the apply died (its container may go on until the next command).
	// What the checkouts looked like is logged, as evidence of where in its phase the kill landed.
	before := map[string][]string{}
	var checkouts []string
	ents, _ := os.ReadDir(dir.RunCheckouts(runID))
	for _, e := range ents {
		co := filepath.Join(dir.RunCheckouts(runID), e.Name())
		checkouts = append(checkouts, strings.TrimPrefix(e.Name(), f.prefix)+" "+checkoutState(co))
		for _, w := range randomKillWorkers {
			if strings.HasPrefix(e.Name(), f.node(w)) {
				before[w] = append(before[w], checkoutCommits(co, mainHead)...)
			}
		}
	}
	t.Logf("checkouts at the kill: %v", checkouts)

	// The ledger opens and lists the run, as the kill left it.
	l, err := ledger.OpenReadOnly(dir.Ledger())
	if err != nil {
		t.Fatalf("the ledger does not open after the kill: %v", err)
	}
	runs, err := l.Runs()
	l.Close()
	if err != nil {
		t.Fatalf("the ledger does not list its runs after the kill: %v", err)
	}
	if len(runs) != 1 || runs[0].ID != runID {
		t.Fatalf("the ledger lists %d runs after the kill, want the killed run %s: %+v", len(runs), runID, runs)
	}

	// The next command recovers: no run running, no container of the apply.
	out, stderr, code := runKewplan(t, env, "runs", "--json", "--state-dir", f.stateDir)
	if code != 0 {
		t.Fatalf("kewplan runs exited %d: %s", code, stderr)
	}
	var listed struct{ Runs []ledger.RunRecord }
	if err := json.Unmarshal([]byte(out), &listed); err != nil {
		t.Fatalf("kewplan runs --json: %v\n%s", err, out)
	}
	var killed *ledger.RunRecord
	for i, r := range listed.Runs {
		if r.Status == ledger.RunRunning {
			t.Errorf("run %s still reads running after kewplan runs:\n%s", r.ID, stderr)
		}
		if r.ID == runID {
			killed = &listed.Runs[i]
		}
	}
	if killed == nil {
		t.Fatalf("kewplan runs does not list the killed run %s:\n%s", runID, out)
	}
	checkSaysInterrupted(t, env, &f, killed)
	left, err := f.eng.ListContainers(ctx, planner.LabelRun+"="+runID)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range left {
		t.Errorf("container %s (%s) of the killed run survives kewplan runs", c.Name, c.State)
		_ = f.eng.ForceRemove(c.ID)
	}

	// Nor any of the dead apply's scratch: the broker's repositories of a push it was making.
	if scratch, _ := os.ReadDir(dir.Broker()); len(scratch) > 0 {
		t.Errorf("kewplan runs leaves the dead apply's broker scratch in %s: %v", dir.Broker(), scratch)
	}

	// Every commit made before the kill is on the origin: pushed by the apply, or published from the kept work.
	_, nodes := f.ledgerRun(runID)
	for _, w := range randomKillWorkers {
		n := nodes[f.node(w)]
		if n.Salvage != nil && !n.Pushed {
			out, stderr, code := runKewplan(t, env, "salvage", runID, f.node(w), "--json", "--state-dir", f.stateDir)
			if code != 0 {
				t.Errorf("kewplan salvage %s %s exited %d: %s%s", runID, w, code, stderr, out)
			}
		}
		for _, c := range before[w] {
			if !origin.contains(c) {
				t.Errorf("%s's commit %s, made before the kill, is neither pushed nor salvageable (node %s, pushed %v, kept %+v)",
					w, c, n.Status, n.Pushed, n.Salvage)
			}
		}
	}
	var seen []string
	for _, name := range []string{"w1", "w2", "rev", "dep"} {
		n, ok := nodes[f.node(name)]
		switch {
		case !ok:
			seen = append(seen, name+" not started")
		case n.Salvage != nil:
			seen = append(seen, fmt.Sprintf("%s %s (%d commits before the kill, kept %s)", name, n.Status, len(before[name]), n.Salvage.Summary()))
		default:
			seen = append(seen, fmt.Sprintf("%s %s (%d commits before the kill, pushed %v)", name, n.Status, len(before[name]), n.Pushed))
		}
	}
	t.Logf("after the kill: %s", strings.Join(seen, "; "))
	if t.Failed() {
		return
	}

	// The resume completes the graph.
	nodes2 := resumeLatest(t, env, &f, runID, "--parallelism", "4")
	for _, name := range []string{"w1", "w2", "rev", "dep"} {
		switch n := nodes2[f.node(name)]; n.Status {
		case ledger.StatusSucceeded, ledger.StatusApproved, ledger.StatusReused:
		default:
			t.Errorf("after the resume %s is %s: %s", name, n.Status, n.Reason)
		}
	}
}

// killApplyAt starts kewplan apply and kills it with SIGKILL at kp; it returns the run's id. It fails the test
// when the apply ends before the kill point.
func killApplyAt(t *testing.T, f *fixture, origin *crashOrigin, env []string, kp killPoint) string {
	t.Helper()
	held := make(chan int, 1)
	if kp.Phase == phasePush {
		must(t, os.WriteFile(origin.hold, []byte("/kew/"+f.node(kp.Node)), 0o600))
		// Opened read-write, the FIFO never blocks the open; the hook's line is read when it comes.
		fifo, err := os.OpenFile(origin.held, os.O_RDWR, 0)
		must(t, err)
		t.Cleanup(func() { fifo.Close() })
		go func() {
			line, err := bufio.NewReader(fifo).ReadString('\n')
			if pid, perr := strconv.Atoi(strings.TrimSpace(line)); err == nil && perr == nil {
				held <- pid
			}
		}()
	}
	r := startKewplan(t, env, "apply", f.dir, "--auto-approve", "--json", "--parallelism", "4", "--state-dir", f.stateDir)
	events := make(chan applyEvent)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(r.stdout)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			var ev applyEvent
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				events <- ev
			}
		}
		io.Copy(io.Discard, r.stdout)
	}()

	runID, progress, receivePack := "", 0, 0
	target := f.node(kp.Node)
	triggered := false
	for !triggered {
		select {
		case pid := <-held:
			receivePack, triggered = pid, true
		case ev, ok := <-events:
			if !ok {
				r.wait()
				t.Fatalf("the apply ended before the kill point %s: %s", kp, r.stderr.String())
			}
			if ev.Type == "apply_start" {
				runID = ev.RunID
			}
			triggered = kp.reached(ev, f, target, &progress)
		}
	}
	if kp.Jitter > 0 {
		time.Sleep(kp.Jitter) // where in the phase's window the kill lands, not a wait for anything
	}
	must(t, r.cmd.Process.Signal(syscall.SIGKILL))
	r.wait()
	for range events {
	}
	if receivePack > 0 {
		releasePush(t, origin, receivePack)
	}
	return runID
}

// reached reports whether ev is kp's trigger; progress counts the target's node_progress events.
func (kp killPoint) reached(ev applyEvent, f *fixture, target string, progress *int) bool {
	switch kp.Phase {
	case phaseClone:
		if kp.Node == "rev" {
			return ev.Type == "node_done" && ev.Node == f.node("w1")
		}
		return ev.Type == "apply_start"
	case phaseStart:
		return ev.Type == "node_start" && ev.Node == target
	case phaseStream:
		// Progress events are throttled (one each 500 ms at most), so a node may end with fewer than Nth of
		// them: the kill then comes at its end.
		if ev.Type == "node_progress" && ev.Node == target {
			*progress++
		}
		return *progress >= kp.Nth || ev.Type == "node_done" && ev.Node == target
	case phaseVerdict:
		// The reviewer's first progress is its init line; the second its last lines, after its pause: its
		// container is exiting and its verdict is about to be collected.
		if ev.Type == "node_progress" && ev.Node == target {
			*progress++
		}
		return *progress >= 2 || ev.Type == "node_done" && ev.Node == target
	case phaseLedger:
		return ev.Type == "node_done" && ev.Node == target
	}
	return false // phasePush: the hook says when
}

// releasePush lets the held push of the killed apply go on and waits for its receive-pack to exit, so that
// nothing of the dead apply writes to the origin after this returns.
func releasePush(t *testing.T, origin *crashOrigin, pid int) {
	t.Helper()
	answerPush(t, origin, pid, "go")
}

// answerPush answers the held push ("reject" refuses it, "go" lets it land) and waits for its receive-pack to exit:
// when it returns, the origin's ref is updated or never will be.
func answerPush(t *testing.T, origin *crashOrigin, pid int, answer string) {
	t.Helper()
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Logf("the held receive-pack %d is gone already: %v", pid, err)
		pidfd = -1
	}
	w, err := os.OpenFile(origin.release, os.O_WRONLY, 0)
	must(t, err)
	_, _ = w.WriteString(answer + "\n")
	w.Close()
	if pidfd < 0 {
		return
	}
	defer unix.Close(pidfd)
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	if _, err := unix.Poll(fds, int((2 * time.Minute).Milliseconds())); err != nil || fds[0].Revents == 0 {
		t.Fatalf("the held receive-pack %d did not exit after its release: %v", pid, err)
	}
}

// checkoutState says how far a checkout had got: cloning (no HEAD yet), cloned, prompt written (its container
// starting or running), verdict written.
func checkoutState(dir string) string {
	cmd := exec.Command("git", "-c", "safe.directory=*", "--git-dir="+filepath.Join(dir, ".git"), "rev-parse", "--verify", "--quiet", "HEAD")
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	if cmd.Run() != nil {
		return "cloning"
	}
	for _, c := range []struct{ file, state string }{{".kew-review-verdict.json", "verdict written"}, {planner.PromptFilename, "prompt written"}} {
		if _, err := os.Lstat(filepath.Join(dir, c.file)); err == nil {
			return c.state
		}
	}
	return "cloned"
}

// checkoutCommits lists the commits of a worker's checkout since base, newest first (none when it has no
// repository yet: the kill came during its clone).
func checkoutCommits(dir, base string) []string {
	cmd := exec.Command("git", "-c", "safe.directory=*", "--git-dir="+filepath.Join(dir, ".git"), "rev-list", base+"..HEAD")
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.Output()
	if err != nil {
		return nil
	}
	return strings.Fields(string(out))
}

// checkSaysInterrupted checks that runs, runs show and the run's receipt say that the killed run was interrupted,
// and since when (a kill in the instant after the apply recorded its end leaves the run its final status, and
// its start receipt only, or the final receipt).
func checkSaysInterrupted(t *testing.T, env []string, f *fixture, run *ledger.RunRecord) {
	t.Helper()
	dir := statedir.Dir{Root: f.stateDir}
	// The receipt, read as JSON (the approval package imports this one).
	var r *struct {
		Status           string     `json:"status"`
		InterruptedSince *time.Time `json:"interrupted_since"`
	}
	if _, err := os.Stat(dir.StartReceipt(run.ID)); err != nil {
		t.Errorf("the killed run has no start receipt: %v", err)
	}
	b, err := os.ReadFile(dir.Receipt(run.ID))
	if err == nil {
		err = json.Unmarshal(b, &r)
	}
	switch {
	case err != nil && run.Status != ledger.RunInterrupted:
		// Killed after recording the run's end, before writing its receipt: the start receipt is all there is.
		r = nil
	case err != nil:
		t.Errorf("the killed run has no receipt after kewplan runs: %v", err)
		r = nil
	case r.Status != run.Status:
		t.Errorf("the receipt says %s, the ledger %s", r.Status, run.Status)
	}
	if run.Status != ledger.RunInterrupted {
		return
	}
	if run.InterruptedSince == nil || run.EndedAt == nil || !run.InterruptedSince.Equal(*run.EndedAt) {
		t.Errorf("kewplan runs --json does not say since when the run is interrupted: %+v", run)
		return
	}
	since := run.InterruptedSince.UTC()
	if r != nil && (r.InterruptedSince == nil || !r.InterruptedSince.Equal(since)) {
		t.Errorf("the receipt says interrupted since %v, the ledger %v", r.InterruptedSince, since)
	}
	list, _, _ := runKewplan(t, env, "runs", "--state-dir", f.stateDir)
	show, _, _ := runKewplan(t, env, "runs", "show", run.ID, "--state-dir", f.stateDir)
	for _, c := range []struct{ what, out, want string }{
		{"kewplan runs", list, "interrupted since " + since.Format("2006-01-02 15:04:05Z")},
		{"kewplan runs show", show, "interrupted    since " + since.Format(time.RFC3339)},
	} {
		if !strings.Contains(c.out, c.want) {
			t.Errorf("%s does not say %q:\n%s", c.what, c.want, c.out)
		}
	}
}
