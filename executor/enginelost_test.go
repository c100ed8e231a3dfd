//go:build linux

package executor

// Fault injection: the Docker engine's socket closes while kewplan apply, run as a child process, has a worker
// running. The test puts a socket relay of its own between kewplan and the engine (DOCKER_HOST points at it) and
// cuts it; the machine's engine is never touched. Cut for longer than the reconnect bound, the apply ends
// interrupted with the worker's work kept, salvage publishes it and apply --resume latest completes the graph
// once the relay is back; cut for less, the apply carries on and the node succeeds.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kewplan/kewplan/executor/engine"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/statedir"
	"github.com/kewplan/kewplan/internal/testtools/sockrelay"
	"github.com/kewplan/kewplan/planner"
)

// relayApply is one kewplan apply --json whose events are read into a channel as they come.
type relayApply struct {
	*kewplanRun
	events chan map[string]any
	seen   []string // the events until read so far, for a failure's message
}

func startRelayApply(t *testing.T, env []string, args ...string) *relayApply {
	t.Helper()
	r := &relayApply{kewplanRun: startKewplan(t, env, args...), events: make(chan map[string]any, 1024)}
	go func() {
		defer close(r.events)
		sc := bufio.NewScanner(r.stdout)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			var ev map[string]any
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				r.events <- ev
			}
		}
	}()
	return r
}

// until reads events until fn says stop; it fails the test when the apply ends first.
func (r *relayApply) until(t *testing.T, what string, fn func(ev map[string]any) bool) {
	t.Helper()
	for ev := range r.events {
		b, _ := json.Marshal(ev)
		r.seen = append(r.seen, string(b))
		if fn(ev) {
			return
		}
	}
	code := r.wait() // stderr is complete once the process is waited for
	t.Fatalf("the apply ended (exit status %d) before %s:\n%s\n%s", code, what, strings.Join(r.seen, "\n"), r.stderr.String())
}

// finish drains the events and returns the exit status and the warnings.
func (r *relayApply) finish() (code int, warnings string) {
	var b strings.Builder
	for ev := range r.events {
		if ev["type"] == "warning" {
			m, _ := ev["message"].(string)
			b.WriteString(m + "\n")
		}
	}
	return r.wait(), b.String()
}

// awaitLogLine waits (polling the file, with a generous backstop) until the node's stdout log holds want: the
// agent's own stream event, written as it arrives.
func awaitLogLine(t *testing.T, path, want string) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	backstop := time.After(2 * time.Minute)
	for {
		if b, err := os.ReadFile(path); err == nil && strings.Contains(string(b), want) {
			return
		}
		select {
		case <-tick.C:
		case <-backstop:
			t.Fatalf("%s never held %q", path, want)
		}
	}
}

// boolCode is 0 for true, 1 for false, for onFailure.
func boolCode(ok bool) int {
	if ok {
		return 0
	}
	return 1
}

// lostNodes are crashNodes with a node that depends on fix: it cannot start before the cut.
const lostNodes = crashNodes + `
node "%%[1]safter" {
  runner     = "claude-code"
  model      = "claude-sonnet-4-5"
  repo       = %%[2]q
  prompt     = "mode=succeed"
  depends_on = [node.%%[1]sfix]
}
`

// relayEnv is kewplan's environment with DOCKER_HOST at the relay and the reconnect bound set.
func relayEnv(relay *sockrelay.Relay, within string) []string {
	return append(baseEnv(), "ANTHROPIC_API_KEY=sk-relay-dummy", "DOCKER_HOST="+relay.Host(), engine.ReconnectWithinEnv+"="+within)
}

// gated is an apply, through its own relay, of one worker that waits at its gate (the stand-in agent's
// mode=gate or gate=first) until open lets it through.
type gated struct {
	relay     *sockrelay.Relay
	r         *relayApply
	runID     string
	checkout  string
	stdoutLog string
}

// startGated applies one node named name with prompt through a new relay (reconnect bound two minutes) and
// returns once its agent waits at its gate.
func startGated(t *testing.T, f *fixture, name, prompt string) *gated {
	t.Helper()
	g := &gated{relay: sockrelay.Start(t, sockrelay.EngineSocket())}
	cfg := f.config(fmt.Sprintf(`
node "%%[1]s%s" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %%[2]q
  prompt = %q
}
`, name, prompt))
	slug := f.plan(cfg).Node(f.node(name)).Slug
	dir := statedir.Dir{Root: f.stateDir}
	g.r = startRelayApply(t, relayEnv(g.relay, "2m"), "apply", f.dir, "--auto-approve", "--json", "--state-dir", f.stateDir)
	g.r.until(t, "the run started", func(ev map[string]any) bool {
		g.runID, _ = ev["run_id"].(string)
		return ev["type"] == "apply_start"
	})
	g.stdoutLog, _ = dir.Logs(g.runID, f.node(name), slug, 1)
	g.checkout = dir.Checkout(g.runID, f.node(name), slug, 1)
	awaitLogLine(t, g.stdoutLog, "waiting for the gate")
	return g
}

// open lets the agent through its gate.
func (g *gated) open(t *testing.T) {
	t.Helper()
	must(t, os.WriteFile(filepath.Join(g.checkout, ".kew-gate"), nil, 0o644))
}

// awaitReconnect waits for apply's warning that the engine answered again.
func awaitReconnect(t *testing.T, r *relayApply) {
	t.Helper()
	r.until(t, "the engine was reached again", func(ev map[string]any) bool {
		m, _ := ev["message"].(string)
		return ev["type"] == "warning" && strings.Contains(m, "answered again after")
	})
}

// TestAdvEngineLostMidNode (F15, F16): the engine's socket closes while a worker that has committed waits, and stays
// closed past the reconnect bound. The apply ends by itself, non-zero, with the run and the node interrupted (docs,
// which had succeeded, keeps its outcome), the worker's commits and edit kept, and a message naming DOCKER_HOST and
// `kewplan apply --resume latest`; salvage publishes the kept work while the engine is still cut. With the socket
// back, apply --resume latest stops and sweeps the old container, reuses docs and completes fix.
func TestAdvEngineLostMidNode(t *testing.T) {
	f15 := adv(t, "F15", "the Docker engine's socket closes mid-node (a relay the test cuts) and stays closed past the reconnect bound",
		"apply ends by itself, non-zero; the run and the running node are interrupted, not failed; the node's commits are kept; the message names DOCKER_HOST and apply --resume latest; salvage publishes the work")
	f16 := adv(t, "F16", "kewplan apply --resume latest once the engine's socket is back",
		"the old run's container is stopped and swept, the node that succeeded is reused, the interrupted one completes")
	f := newFixture(t)
	remote := f.bareRemote()
	relay := sockrelay.Start(t, sockrelay.EngineSocket())
	env := relayEnv(relay, "2s")

	cfg := f.config(fmt.Sprintf(lostNodes, "commits=2\nedit=README.md:edited by the agent\nmode=gate"))
	fixSlug := f.plan(cfg).Node(f.node("fix")).Slug
	dir := statedir.Dir{Root: f.stateDir}
	r := startRelayApply(t, env, "apply", f.dir, "--auto-approve", "--json", "--state-dir", f.stateDir)
	runID, docsDone := "", false
	r.until(t, "docs succeeded", func(ev map[string]any) bool {
		switch ev["type"] {
		case "apply_start":
			runID, _ = ev["run_id"].(string)
		case "node_done":
			if ev["node"] == f.node("docs") {
				if ev["status"] != ledger.StatusSucceeded {
					t.Fatalf("docs ended %v before the cut", ev["status"])
				}
				docsDone = true
			}
		}
		return docsDone
	})
	stdoutLog, _ := dir.Logs(runID, f.node("fix"), fixSlug, 1)
	awaitLogLine(t, stdoutLog, "waiting for the gate") // after its commits and its edit
	relay.Cut()
	cutAt := time.Now()
	code, warnings := r.finish()
	t.Logf("the apply ended %s after the cut (bound 2s); it warned:\n%s", time.Since(cutAt).Round(time.Millisecond), warnings)

	f15.check(code != 0, "the apply exited %d", code)
	for _, want := range []string{"stopped answering", "DOCKER_HOST=" + relay.Host(), "`kewplan apply --resume latest`", "interrupted nodes: " + f.node("fix")} {
		f15.check(strings.Contains(warnings, want), "the apply says %q", want)
	}
	run, nodes := f.ledgerRun(runID)
	fix, docs := nodes[f.node("fix")], nodes[f.node("docs")]
	f15.check(run.Status == ledger.RunInterrupted && run.EndedAt != nil, "the run is recorded %s (ended %v)", run.Status, run.EndedAt)
	f15.check(fix.Status == ledger.StatusInterrupted && fix.EndedAt != nil && strings.Contains(fix.Reason, "stopped answering"),
		"fix is recorded %s: %s", fix.Status, fix.Reason)
	f15.check(docs.Status == ledger.StatusSucceeded, "docs keeps its outcome: %s", docs.Status)
	after := nodes[f.node("after")]
	f15.check(after.Status == ledger.StatusSkipped && after.Reason == notStartedEngineLost && strings.Contains(warnings, "not started: "+f.node("after")),
		"after, which depends on fix, is not started: %s (%s)", after.Status, after.Reason)
	s := fix.Salvage
	f15.check(s != nil && s.Commits == 2 && s.FilesChanged == 1, "fix's work is kept: %+v", s)
	if s == nil {
		t.FailNow()
	}

	// Live control: the engine itself never stopped, so the agent still runs where kewplan could not reach it.
	left, err := f.eng.ListContainers(t.Context(), planner.LabelRun+"="+runID)
	running := 0
	for _, c := range left {
		if c.Labels[planner.LabelNode] == f.node("fix") && c.State == "running" {
			running++
		}
	}
	f15.check(err == nil && running == 1, "live control: fix's container still runs on the engine (%d)", running)
	t.Cleanup(func() {
		for _, c := range left {
			_ = f.eng.ForceRemove(c.ID)
		}
	})

	out, stderr, code := runKewplan(t, env, "salvage", runID, f.node("fix"), "--json", "--state-dir", f.stateDir)
	f15.check(code == 0, "kewplan salvage exited %d while the engine is cut%s", code, onFailure(code, stderr))
	var published struct{ Branch, Commit string }
	_ = json.Unmarshal([]byte(out), &published)
	if published.Branch != "" {
		revs := strings.Fields(gitOut(t, "--git-dir="+remote, "rev-list", s.BaseCommit+".."+published.Branch))
		f15.check(len(revs) == 3 && revs[1] == s.Head, "the salvage branch %s holds the edit's commit on the agent's two: %v", published.Branch, revs)
	} else {
		f15.check(false, "kewplan salvage published no branch: %s", out)
	}

	must(t, relay.Restore())
	f.config(fmt.Sprintf(lostNodes, "mode=succeed"))
	out, stderr, code = runKewplan(t, env, "apply", f.dir, "--resume", "latest", "--auto-approve", "--json", "--state-dir", f.stateDir)
	f16.check(code == 0, "apply --resume latest exited %d%s", code, onFailure(code, stderr))
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
	said := out + stderr
	f16.check(strings.Contains(said, "stopped container") && strings.Contains(said, "left running by run "+runID), "the resumed apply stopped the old run's container%s",
		onFailure(boolCode(strings.Contains(said, "left running by run "+runID)), said))
	left, err = f.eng.ListContainers(t.Context(), planner.LabelRun+"="+runID)
	f16.check(err == nil && len(left) == 0, "no container of the cut run survives the resumed apply (%d left)", len(left))
	_, statErr := os.Stat(dir.RunCheckouts(runID))
	f16.check(os.IsNotExist(statErr), "the cut run's checkouts are swept: %v", statErr)
	run2, nodes2 := f.ledgerRun(resumed)
	f16.check(run2.ResumedFrom == runID && run2.Status == ledger.RunSucceeded, "the resumed run %s resumed %q", run2.Status, run2.ResumedFrom)
	f16.check(nodes2[f.node("docs")].Status == ledger.StatusReused, "docs is reused: %s", nodes2[f.node("docs")].Status)
	f16.check(nodes2[f.node("after")].Status == ledger.StatusSucceeded, "after runs: %s", nodes2[f.node("after")].Status)
	fix2 := nodes2[f.node("fix")]
	f16.check(fix2.Status == ledger.StatusSucceeded && fix2.Pushed, "fix completes and pushes: %s (%s)", fix2.Status, fix2.Reason)
	if fix2.Pushed {
		revs := strings.Fields(gitOut(t, "--git-dir="+remote, "rev-list", s.BaseCommit+".."+fix2.Branch))
		f16.check(len(revs) == 3 && revs[1] == s.Head, "fix's push carries the kept commits: %v (kept head %s)", revs, s.Head)
	}
	f.assertClean(resumed)
}

// TestAdvEngineShortCutCarriesOn (F17): the engine's socket closes while a worker waits and is back within the
// reconnect bound. The apply follows the container again (its wait and its output, from the engine's log where
// the attach stream ended), the worker finishes and the node succeeds; its log holds every line of the agent's
// stream once.
func TestAdvEngineShortCutCarriesOn(t *testing.T) {
	f17 := adv(t, "F17", "the Docker engine's socket closes mid-node and is back within the reconnect bound",
		"the apply carries on: the container is followed again, the node succeeds, its log holds the whole stream once")
	f := newFixture(t)
	f.bareRemote()
	g := startGated(t, f, "gate", "commits=1\nmode=gate")
	g.relay.Cut()
	must(t, g.relay.Restore())
	awaitReconnect(t, g.r)
	// The container is followed again: let the agent through its gate.
	g.open(t)
	r, runID, stdoutLog := g.r, g.runID, g.stdoutLog
	code, warnings := r.finish()
	f17.check(code == 0, "the apply exited %d%s", code, onFailure(code, warnings+r.stderr.String()))
	_, nodes := f.ledgerRun(runID)
	gate := nodes[f.node("gate")]
	f17.check(gate.Status == ledger.StatusSucceeded && gate.Pushed, "the node succeeds and pushes: %s (%s)", gate.Status, gate.Reason)
	log, err := os.ReadFile(stdoutLog)
	must(t, err)
	for _, line := range []string{"waiting for the gate", "through the gate", `"type":"result"`} {
		f17.check(strings.Count(string(log), line) == 1, "the node's log holds %q once (%d)", line, strings.Count(string(log), line))
	}
	f.assertClean(runID)
}

// TestAdvEngineCutWhileTheAgentEnds (F18): the agent finishes and its container is removed while the engine's
// socket is closed; the socket is back within the bound. Its exit code is read from the engine's events, the node
// succeeds and pushes, and apply warns that what the agent wrote while the engine was away is lost.
func TestAdvEngineCutWhileTheAgentEnds(t *testing.T) {
	f18 := adv(t, "F18", "the agent ends and its container is removed while the engine's socket is closed; the socket is back within the bound",
		"the exit is read from the engine's events, not guessed: the node succeeds; apply warns that the output written meanwhile is lost")
	f := newFixture(t)
	f.bareRemote()
	g := startGated(t, f, "gate", "commits=1\nmode=gate")
	relay, r, runID := g.relay, g.r, g.runID
	relay.Cut()
	g.open(t)
	// The machine's engine (not the relay) says when the container is gone.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	backstop := time.After(2 * time.Minute)
	for gone := false; !gone; {
		list, err := f.eng.ListContainers(t.Context(), planner.LabelRun+"="+runID)
		must(t, err)
		gone = true
		for _, c := range list {
			if c.Labels[planner.LabelNode] == f.node("gate") {
				gone = false
			}
		}
		if !gone {
			select {
			case <-tick.C:
			case <-backstop:
				t.Fatal("the agent's container was not removed after its gate opened")
			}
		}
	}
	must(t, relay.Restore())
	code, warnings := r.finish()
	f18.check(code == 0, "the apply exited %d%s", code, onFailure(code, warnings+r.stderr.String()))
	_, nodes := f.ledgerRun(runID)
	gate := nodes[f.node("gate")]
	f18.check(gate.Status == ledger.StatusSucceeded && gate.Pushed && gate.ExitCode != nil && *gate.ExitCode == 0,
		"the node succeeds with the exit code the engine recorded: %s (%s)", gate.Status, gate.Reason)
	f18.check(strings.Contains(warnings, "answered again after") && strings.Contains(warnings, "is lost"),
		"apply says the engine answered again and the output written meanwhile is lost:\n%s", warnings)
	f.assertClean(runID)
}

// TestAdvEngineShortCutProxyLog (F19): the engine's socket closes while a proxied worker waits, and is back within
// the bound; the worker then makes a request the egress proxy refuses. The proxy's decision log, whose stream the
// cut ended too, is followed on from the proxy's log: the refusal reaches the apply's events.
func TestAdvEngineShortCutProxyLog(t *testing.T) {
	f19 := adv(t, "F19", "the engine's socket closes while a proxied worker runs and is back within the bound; the worker's next CONNECT is refused",
		"the egress proxy's decision log is followed on after the reconnect: the refusal is recorded")
	f := newFixture(t)
	newEgressWorld(t, f)
	f.bareRemote()
	g := startGated(t, f, "out", "gate=first\nmode=egress\ntargets=evil.example.com:443")
	g.relay.Cut()
	must(t, g.relay.Restore())
	awaitReconnect(t, g.r)
	g.open(t)
	r, runID := g.r, g.runID
	denied := false
	r.until(t, "the refusal was recorded", func(ev map[string]any) bool {
		denied = ev["type"] == "egress_denied" && ev["host"] == "evil.example.com"
		return denied
	})
	code, warnings := r.finish()
	f19.check(denied, "the apply reports the proxy's refusal of evil.example.com:443 made after the reconnect")
	f19.check(code == 0, "the apply exited %d%s", code, onFailure(code, warnings+r.stderr.String()))
	f.assertClean(runID)
}

// TestAdvEngineStartAnswerLost (F20): the engine's socket closes just as it answers the request that starts a
// worker's container (the container started; the answer is lost), and is back within the bound. The container is
// taken for what the engine says it is, running, and followed: the node succeeds instead of failing to start.
func TestAdvEngineStartAnswerLost(t *testing.T) {
	f20 := adv(t, "F20", "the engine's socket closes as the engine answers the start of a worker's container, and is back within the bound",
		"the container the engine started is followed, never removed as unstarted: the node succeeds")
	f := newFixture(t)
	f.bareRemote()
	relay := sockrelay.Start(t, sockrelay.EngineSocket())
	env := relayEnv(relay, "2m")
	cfg := f.config(`
node "%[1]sstart" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  prompt = "commits=1\nmode=gate"
}
`)
	slug := f.plan(cfg).Node(f.node("start")).Slug
	dir := statedir.Dir{Root: f.stateDir}
	// The node's container is created under its name; the next start request on the engine is its start.
	created := false
	cut := relay.CutOnAnswer(func(chunk []byte) bool {
		req := string(chunk)
		if strings.Contains(req, "/containers/create?name=kew-"+f.node("start")) {
			created = true
			return false
		}
		return created && strings.HasPrefix(req, "POST ") && strings.Contains(req, "/start ")
	})
	r := startRelayApply(t, env, "apply", f.dir, "--auto-approve", "--json", "--state-dir", f.stateDir)
	select {
	case <-cut:
	case <-time.After(2 * time.Minute): // backstop only
		t.Fatal("the node's start request never went through the relay")
	}
	must(t, relay.Restore())
	runID := ""
	r.until(t, "the engine was reached again", func(ev map[string]any) bool {
		if ev["type"] == "apply_start" {
			runID, _ = ev["run_id"].(string)
		}
		m, _ := ev["message"].(string)
		return ev["type"] == "warning" && strings.Contains(m, "answered again after")
	})
	stdoutLog, _ := dir.Logs(runID, f.node("start"), slug, 1)
	awaitLogLine(t, stdoutLog, "waiting for the gate")
	must(t, os.WriteFile(filepath.Join(dir.Checkout(runID, f.node("start"), slug, 1), ".kew-gate"), nil, 0o644))
	code, warnings := r.finish()
	f20.check(code == 0, "the apply exited %d%s", code, onFailure(code, warnings+r.stderr.String()))
	_, nodes := f.ledgerRun(runID)
	n := nodes[f.node("start")]
	f20.check(n.Status == ledger.StatusSucceeded && n.Pushed, "the node succeeds and pushes: %s (%s)", n.Status, n.Reason)
	log, err := os.ReadFile(stdoutLog)
	must(t, err)
	f20.check(strings.Count(string(log), "waiting for the gate") == 1 && strings.Count(string(log), `"type":"result"`) == 1,
		"the node's log holds its stream once")
	f.assertClean(runID)
}
