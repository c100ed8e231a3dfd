package executor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/zclconf/go-cty/cty"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/executor/docker"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/statedir"
	"github.com/kewplan/kewplan/executor/verdict"
	"github.com/kewplan/kewplan/planner"
)

// TestApplyReviewerTelemetry: a reviewer that approves; the ledger holds exactly what the fake agent streamed.
func TestApplyReviewerTelemetry(t *testing.T) {
	f := newFixture(t)
	cfg := f.config(`
node "%[1]sreview" {
  runner = "claude-code"
  role   = "reviewer"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  ref    = "main"
  prompt = "mode=verdict\nverdict=approve\ntokens=101,202,303,404\ncost=0.5\nsession=sess-42"
}
`)
	sum, rec, err := f.apply(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	name := f.node("review")
	res := resultOf(t, sum, name)
	if res.Status != ledger.StatusApproved {
		t.Fatalf("status %s (%s), want approved", res.Status, res.Reason)
	}
	if sum.Status != ledger.RunSucceeded {
		t.Errorf("run status %s, want succeeded", sum.Status)
	}
	run, nodes := f.ledgerRun(sum.RunID)
	if run.Status != ledger.RunSucceeded || run.EndedAt == nil || run.ConfigDigest == "" {
		t.Errorf("run row: %+v", run)
	}
	n := nodes[name]
	cost := 0.5
	turns := int64(2)
	exit := int64(0)
	want := ledger.NodeRecord{
		RunID: sum.RunID, Node: name, Runner: "claude-code", Protocol: "claude-code", Role: "reviewer",
		Image: f.image, RoutedModel: "claude-sonnet-4-5", ReportedModel: "claude-sonnet-4-5", ModelSource: "reported",
		SessionID: "sess-42", InputTokens: 101, OutputTokens: 202, CacheReadTokens: 303, CacheWriteTokens: 404,
		CostUSD: &cost, Turns: &turns, Finished: true, Events: 3, ExitCode: &exit, Status: ledger.StatusApproved,
		Verdict: "approve", VerdictSummary: "fake review", VerdictFindings: []verdict.Finding{}, SidecarLocation: ".kew-review-verdict.json",
		CostSource: ledger.CostReported,
	}
	got := n
	// Fields checked separately (ids, paths, digests and times vary per run).
	if !strings.HasPrefix(got.ImageID, "sha256:") || got.SidecarSHA256 == "" || got.BaseCommit == "" || got.Commit != got.BaseCommit ||
		got.StartedAt == nil || got.EndedAt == nil || got.PromptSHA256 == "" || len(got.Argv) == 0 {
		t.Errorf("node row is missing ids, digests or times: %+v", got)
	}
	got.ImageID, got.SidecarSHA256, got.BaseCommit, got.Commit, got.StartedAt, got.EndedAt = "", "", "", "", nil, nil
	got.PromptSHA256, got.Argv, got.StdoutLog, got.StderrLog = "", nil, "", ""
	if got.Fingerprint == "" || got.Attempts != 1 {
		t.Errorf("node row: fingerprint %q, %d attempts; want a fingerprint and 1 attempt", got.Fingerprint, got.Attempts)
	}
	got.Fingerprint, got.Attempts = "", 0
	got.Repo, got.Slug = "", "" // where crash recovery finds the checkout
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ledger node row (-want +got):\n%s", diff)
	}
	for _, w := range n.Argv {
		if strings.Contains(w, planner.CheckoutPlaceholder) || strings.Contains(w, planner.RunPlaceholder) {
			t.Errorf("recorded argv still has a placeholder: %q", n.Argv)
		}
		if strings.Contains(w, "sk-test-dummy-value") {
			t.Fatalf("a credential value reached the recorded argv")
		}
	}
	// The stdout log is the stream, verbatim.
	log, err := os.ReadFile(n.StdoutLog)
	if err != nil || !strings.Contains(string(log), `"session_id":"sess-42"`) {
		t.Errorf("stdout log %s: %v\n%s", n.StdoutLog, err, log)
	}
	if len(rec.progress) == 0 {
		t.Error("no progress event was reported")
	}
	assertNoSecret(t, f.stateDir, "sk-test-dummy-value")
}

// assertNoSecret fails when a credential value appears in any file of the state directory.
func assertNoSecret(t *testing.T, dir, secret string) {
	t.Helper()
	_ = filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || !info.Mode().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), secret) {
			t.Errorf("credential value found in %s", p)
		}
		return nil
	})
}

// TestApplyAgentFailureSkipsDependents: a failing agent fails its node, and everything downstream is skipped with
// the reason; no container, no prompt file remains.
func TestApplyAgentFailureSkipsDependents(t *testing.T) {
	f := newFixture(t)
	cfg := f.config(`
node "%[1]sa" {
  runner = "claude-code"
  role   = "reviewer"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  prompt = "mode=fail"
}
node "%[1]sb" {
  runner     = "claude-code"
  role       = "reviewer"
  model      = "claude-sonnet-4-5"
  repo       = %[2]q
  prompt     = "mode=verdict"
  depends_on = [node.%[1]sa]
}
node "%[1]sc" {
  runner = "claude-code"
  role   = "reviewer"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  ref    = node.%[1]sb.commit
  prompt = "mode=verdict"
}
`)
	sum, rec, err := f.apply(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	a, b, c := resultOf(t, sum, f.node("a")), resultOf(t, sum, f.node("b")), resultOf(t, sum, f.node("c"))
	if a.Status != ledger.StatusFailed || a.ExitCode == nil || *a.ExitCode != 3 || !strings.Contains(a.Reason, "failing as asked") {
		t.Errorf("a: %s exit %v: %s", a.Status, a.ExitCode, a.Reason)
	}
	if b.Status != ledger.StatusSkipped || !strings.Contains(b.Reason, `"`+f.node("a")+`" failed`) {
		t.Errorf("b: %s: %s", b.Status, b.Reason)
	}
	if c.Status != ledger.StatusSkipped || !strings.Contains(c.Reason, f.node("b")) {
		t.Errorf("c: %s: %s", c.Status, c.Reason)
	}
	if sum.Status != ledger.RunFailed {
		t.Errorf("run status %s, want failed", sum.Status)
	}
	if got := rec.events; !slices.Contains(got, "done "+f.node("c")+" skipped") || slices.Contains(got, "start "+f.node("b")) {
		t.Errorf("events: %q", got)
	}
	_, nodes := f.ledgerRun(sum.RunID)
	if nodes[f.node("a")].Status != ledger.StatusFailed || !nodes[f.node("a")].IsError || nodes[f.node("c")].Status != ledger.StatusSkipped {
		t.Errorf("ledger rows: %+v", nodes)
	}
}

// TestApplyTimeout: a hanging agent is killed at its timeout.
func TestApplyTimeout(t *testing.T) {
	f := newFixture(t)
	cfg := f.config(`
node "%[1]shang" {
  runner  = "claude-code"
  role    = "reviewer"
  model   = "claude-sonnet-4-5"
  repo    = %[2]q
  prompt  = "mode=hang"
  timeout = "2s"
}
`)
	sum, _, err := f.apply(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	res := resultOf(t, sum, f.node("hang"))
	if res.Status != ledger.StatusTimedOut || !strings.Contains(res.Reason, "2s timeout") {
		t.Errorf("status %s: %s, want timed_out", res.Status, res.Reason)
	}
	_, nodes := f.ledgerRun(sum.RunID)
	if n := nodes[f.node("hang")]; n.Status != ledger.StatusTimedOut || n.SessionID != "fake-session" {
		t.Errorf("ledger row: %+v", n)
	}
}

// TestApplyCancellation: cancelling apply (what SIGINT does) kills and removes the running container, deletes
// the prompt file, marks the node and the run cancelled, and starts nothing new.
func TestApplyCancellation(t *testing.T) {
	f := newFixture(t)
	cfg := f.config(`
node "%[1]shang" {
  runner = "claude-code"
  role   = "reviewer"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  prompt = "mode=hang"
}
node "%[1]safter" {
  runner     = "claude-code"
  role       = "reviewer"
  model      = "claude-sonnet-4-5"
  repo       = %[2]q
  prompt     = "mode=verdict"
  depends_on = [node.%[1]shang]
}
`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var once sync.Once
	sum, _, err := f.apply(ctx, cfg, func(o *ApplyOptions) {
		o.Hooks[0].(*recorder).onProg = func(e NodeProgressEvent) {
			// The init event arrived: the container runs. Cancel as a signal would.
			if e.Totals.SessionID != "" {
				once.Do(cancel)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	if sum.Status != ledger.RunCancelled {
		t.Errorf("run status %s, want cancelled", sum.Status)
	}
	hang, after := resultOf(t, sum, f.node("hang")), resultOf(t, sum, f.node("after"))
	if hang.Status != ledger.StatusCancelled || after.Status != ledger.StatusCancelled && after.Status != ledger.StatusSkipped {
		t.Errorf("hang %s (%s), after %s (%s)", hang.Status, hang.Reason, after.Status, after.Reason)
	}
	run, _ := f.ledgerRun(sum.RunID)
	if run.Status != ledger.RunCancelled {
		t.Errorf("ledger run status %s, want cancelled", run.Status)
	}
}

// TestApplyPreflightMissingImage: nothing runs when an image is not present; the error says how to fix it.
func TestApplyPreflightMissingImage(t *testing.T) {
	f := newFixture(t)
	f.image = "kewplan-test/does-not-exist:" + randomSuffix()
	cfg := f.config(`
node "%[1]sx" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  prompt = "mode=succeed"
}
`)
	_, _, err := f.apply(context.Background(), cfg)
	var pe *PreflightError
	if !errors.As(err, &pe) {
		t.Fatalf("Apply() error = %v, want a preflight error", err)
	}
	if !strings.Contains(err.Error(), f.image) || !strings.Contains(err.Error(), "never pulls") || !strings.Contains(err.Error(), "docker build") {
		t.Errorf("the error does not name the image and the fix: %v", err)
	}
	if _, err := os.Stat(filepath.Join(f.stateDir, "checkouts")); err == nil {
		t.Error("a checkout was made although preflight failed")
	}
}

// TestApplyPreflightProblems: a missing network, missing credentials and a held lock are all reported at once.
func TestApplyPreflightProblems(t *testing.T) {
	f := newFixture(t)
	f.network = "kewplan-test-missing-" + randomSuffix()
	cfg := f.config(`
node "%[1]sx" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  prompt = "mode=succeed"
}
`)
	if err := os.MkdirAll(f.stateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	held, err := ledger.LockStateDir(statedir.Dir{Root: f.stateDir})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock()
	_, _, err = f.apply(context.Background(), cfg, func(o *ApplyOptions) {
		var env []string
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "ANTHROPIC_API_KEY=") && !strings.HasPrefix(kv, "CLAUDE_CODE_OAUTH_TOKEN=") {
				env = append(env, kv)
			}
		}
		o.Environ = env
	})
	var pe *PreflightError
	if !errors.As(err, &pe) {
		t.Fatalf("Apply() error = %v, want a preflight error", err)
	}
	msg := err.Error()
	for _, want := range []string{"another kewplan apply", "export ANTHROPIC_API_KEY", "docker network create --internal " + f.network, "fails closed"} {
		if !strings.Contains(msg, want) {
			t.Errorf("preflight error lacks %q:\n%s", want, msg)
		}
	}
}

// TestApplyEngineErrorMidRun: the image disappears after preflight; the node fails with the engine's reason, and
// cleanup still holds.
func TestApplyEngineErrorMidRun(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	doomed := "kewplan-test/doomed:" + randomSuffix()
	if err := f.eng.TagImage(ctx, f.image, doomed); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.eng.RemoveImage(context.Background(), doomed) })
	f.image = doomed
	cfg := f.config(`
node "%[1]sx" {
  runner = "claude-code"
  role   = "reviewer"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  prompt = "mode=verdict"
}
`)
	sum, _, err := f.apply(ctx, cfg, func(o *ApplyOptions) {
		o.Hooks[0].(*recorder).onStart = func(NodeStartEvent) {
			if err := f.eng.RemoveImage(context.Background(), doomed); err != nil {
				t.Error(err)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	res := resultOf(t, sum, f.node("x"))
	if res.Status != ledger.StatusFailed || !strings.Contains(res.Reason, "create container") {
		t.Errorf("status %s: %s, want failed creating the container", res.Status, res.Reason)
	}
}

// TestApplyHugeAndGarbageOutput: an oversized line and garbage are counted, never fatal, and the log keeps every
// byte.
func TestApplyHugeAndGarbageOutput(t *testing.T) {
	f := newFixture(t)
	cfg := f.config(`
node "%[1]shuge" {
  runner = "claude-code"
  role   = "reviewer"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  prompt = "mode=huge"
}
node "%[1]sgarbage" {
  runner = "claude-code"
  role   = "reviewer"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  prompt = "mode=garbage"
}
`)
	// Both nodes write no verdict: they end held, which is the reviewer's fail-closed outcome.
	sum, _, err := f.apply(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	_, nodes := f.ledgerRun(sum.RunID)
	huge, garbage := nodes[f.node("huge")], nodes[f.node("garbage")]
	if huge.OversizedLines != 1 || huge.InputTokens != 11 || !huge.Finished {
		t.Errorf("huge: oversized %d, input %d, finished %v", huge.OversizedLines, huge.InputTokens, huge.Finished)
	}
	if fi, err := os.Stat(huge.StdoutLog); err != nil || fi.Size() < 20<<20 {
		t.Errorf("the huge line did not reach the log verbatim: %v", err)
	}
	if garbage.UnparsedLines < 3 || garbage.OutputTokens != 22 || !garbage.Finished {
		t.Errorf("garbage: unparsed %d, output %d, finished %v", garbage.UnparsedLines, garbage.OutputTokens, garbage.Finished)
	}
	for _, n := range []ledger.NodeRecord{huge, garbage} {
		if n.Status != ledger.StatusHeld {
			t.Errorf("%s: %s (%s), want held (no verdict)", n.Node, n.Status, n.Reason)
		}
	}
}

// TestApplyReplansDownstream: a downstream node's prompt and ref use upstream outputs; apply renders them once
// known and records the prompt digest and argv it actually used.
func TestApplyReplansDownstream(t *testing.T) {
	f := newFixture(t)
	cfg := f.config(`
node "%[1]sup" {
  runner = "claude-code"
  role   = "reviewer"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  prompt = "mode=verdict\nsession=upstream-session"
}
node "%[1]sdown" {
  runner = "claude-code"
  role   = "reviewer"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  ref    = node.%[1]sup.commit
  prompt = "mode=verdict\nsession=${node.%[1]sup.session_id}-down\n"
}
`)
	p := f.plan(cfg)
	if down := p.Node(f.node("down")); down == nil || len(down.Unknown) == 0 {
		t.Fatalf("the downstream node should be unknown at plan time: %+v", down)
	}
	sum, _, err := f.apply(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	up, down := resultOf(t, sum, f.node("up")), resultOf(t, sum, f.node("down"))
	if up.Status != ledger.StatusApproved || down.Status != ledger.StatusApproved {
		t.Fatalf("up %s (%s), down %s (%s)", up.Status, up.Reason, down.Status, down.Reason)
	}
	if down.Totals.SessionID != "upstream-session-down" {
		t.Errorf("downstream session %q: its prompt was not rendered from the upstream outputs", down.Totals.SessionID)
	}
	if down.BaseCommit != up.Commit {
		t.Errorf("downstream checked out %s, want upstream's commit %s", down.BaseCommit, up.Commit)
	}
	// The recorded digest is the rendered prompt's (the planner appends the reviewer paragraph).
	replanned, diags := planner.Build(cfg, planner.Inputs{FS: os.DirFS(cfg.Dir), Targets: []string{f.node("down")},
		Outputs: map[string]map[string]cty.Value{f.node("up"): nodeOutputs(&up)}})
	if diags.HasErrors() {
		t.Fatal(config.DiagnosticsText(diags))
	}
	np := replanned.Node(f.node("down"))
	h := sha256.Sum256([]byte(np.Prompt.Text))
	if down.PromptSHA256 != hex.EncodeToString(h[:]) {
		t.Errorf("recorded prompt digest %s, want %s", down.PromptSHA256, hex.EncodeToString(h[:]))
	}
}

// TestApplyParallelism: never more than Parallelism nodes run at once.
func TestApplyParallelism(t *testing.T) {
	f := newFixture(t)
	var nodes strings.Builder
	for _, n := range []string{"p1", "p2", "p3", "p4"} {
		nodes.WriteString(`
node "%[1]s` + n + `" {
  runner = "claude-code"
  role   = "reviewer"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  prompt = "mode=verdict\nsleep=300ms"
}
`)
	}
	cfg := f.config(nodes.String())
	var mu sync.Mutex
	running, peak := 0, 0
	rec := &parallelHook{onStart: func() {
		mu.Lock()
		running++
		peak = max(peak, running)
		mu.Unlock()
	}, onDone: func() {
		mu.Lock()
		running--
		mu.Unlock()
	}}
	sum, _, err := f.apply(context.Background(), cfg, func(o *ApplyOptions) { o.Parallelism = 2; o.Hooks = []Hook{rec} })
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	if sum.Status != ledger.RunSucceeded {
		t.Fatalf("run %s: %+v", sum.Status, sum.Nodes)
	}
	if peak > 2 || peak < 1 {
		t.Errorf("peak concurrency %d, want at most 2", peak)
	}
}

type parallelHook struct {
	NilHook
	onStart, onDone func()
}

func (p *parallelHook) NodeStart(NodeStartEvent) { p.onStart() }
func (p *parallelHook) NodeDone(r ledger.NodeResult) {
	if r.Status != ledger.StatusSkipped {
		p.onDone()
	}
}

// TestApplySweepsADeadApply: what a killed apply left (a running row, its container, a prompt file) is marked
// interrupted and cleaned up by the next apply before it starts anything.
func TestApplySweepsADeadApply(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if err := os.MkdirAll(f.stateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	l, err := ledger.Open(statedir.Dir{Root: f.stateDir}.Ledger())
	if err != nil {
		t.Fatal(err)
	}
	dead := "20000101T000000Z-dead00"
	if err := l.StartRun(ledger.RunRecord{ID: dead, StartedAt: time.Now().Add(-time.Hour), PID: 999999}); err != nil {
		t.Fatal(err)
	}
	if err := l.RecordNode(&ledger.NodeResult{RunID: dead, Node: f.node("old"), Status: ledger.StatusRunning, Started: time.Now()}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	// Its checkout, still holding the prompt, and its container, still running.
	checkout := filepath.Join(f.stateDir, "checkouts", dead, f.node("old"))
	if err := os.MkdirAll(checkout, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(checkout, planner.PromptFilename), []byte("mode=hang"), 0o644); err != nil {
		t.Fatal(err)
	}
	orphan := docker.FillContainer(&planner.Container{Name: "kew-" + f.node("old"), Node: f.node("old"), Image: f.image, Network: f.network, PidsLimit: 64,
		Env: []string{"ANTHROPIC_API_KEY"}}, dead, checkout)
	spec, err := docker.ApplyContainerSpec(orphan, map[string]string{}, 999999)
	if err != nil {
		t.Fatal(err)
	}
	spec.HostConfig.AutoRemove = false
	spec.SetEntrypoint([]string{"/fakeagent"}, nil)
	if _, err := f.eng.CreateContainer(ctx, spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.eng.ForceRemove(spec.Name) })

	cfg := f.config(`
node "%[1]snew" {
  runner = "claude-code"
  role   = "reviewer"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  prompt = "mode=verdict"
}
`)
	sum, rec, err := f.apply(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	f.assertClean(dead)
	warnings := rec.warningText()
	for _, want := range []string{"run " + dead + " was interrupted", "removed container kew-" + f.node("old"), "deleted a prompt file left by run " + dead} {
		if !strings.Contains(warnings, want) {
			t.Errorf("warnings lack %q:\n%s", want, warnings)
		}
	}
	run, nodes := f.ledgerRun(dead)
	if run.Status != ledger.RunInterrupted || nodes[f.node("old")].Status != ledger.StatusInterrupted {
		t.Errorf("dead run %s, node %s; want interrupted", run.Status, nodes[f.node("old")].Status)
	}
	if exists, _ := f.eng.ContainerExists(ctx, spec.Name); exists {
		t.Error("the orphan container still exists")
	}
}

// TestApplyRedactsCredentialEchoes: an agent that echoes its credential never gets it into the ledger, the
// reason or the events; only its raw logs (owner-only files) keep what it printed.
func TestApplyRedactsCredentialEchoes(t *testing.T) {
	f := newFixture(t)
	cfg := f.config(`
node "%[1]sleak" {
  runner = "claude-code"
  role   = "reviewer"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  prompt = "mode=leak"
}
`)
	sum, rec, err := f.apply(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	res := resultOf(t, sum, f.node("leak"))
	if res.Status != ledger.StatusFailed || !strings.Contains(res.Reason, "the key is [redacted ANTHROPIC_API_KEY]") {
		t.Errorf("status %s, reason %q", res.Status, res.Reason)
	}
	if res.Totals.SessionID != "leak-[redacted ANTHROPIC_API_KEY]" {
		t.Errorf("session id %q", res.Totals.SessionID)
	}
	for _, p := range rec.progress {
		if strings.Contains(p.Totals.SessionID+p.Totals.Model, "sk-test-dummy-value") {
			t.Error("a progress event carried the credential")
		}
	}
	db, err := os.ReadFile(statedir.Dir{Root: f.stateDir}.Ledger())
	if err != nil {
		t.Fatal(err)
	}
	wal, _ := os.ReadFile(statedir.Dir{Root: f.stateDir}.Ledger() + "-wal")
	if strings.Contains(string(db)+string(wal), "sk-test-dummy-value") {
		t.Error("the credential value reached the ledger")
	}
	if fi, err := os.Stat(res.StderrLog); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("stderr log must be owner-only: %v %v", fi.Mode(), err)
	}
	// The stored logs are masked as they are written.
	for _, log := range []string{res.StdoutLog, res.StderrLog} {
		b, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "sk-test-dummy-value") || !strings.Contains(string(b), "[MASKED]") {
			t.Errorf("stored log %s is not masked:\n%s", log, b)
		}
	}
}

// TestJanitorLastCleanup: what a second interrupt triggers, while a container runs: the container is removed,
// the prompt file deleted and the run marked cancelled, without waiting for the node to wind down.
func TestJanitorLastCleanup(t *testing.T) {
	f := newFixture(t)
	cfg := f.config(`
node "%[1]shang" {
  runner = "claude-code"
  role   = "reviewer"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  prompt = "mode=hang"
}
`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	janitor := NewJanitor()
	var once sync.Once
	cleaned := make(chan []error, 1)
	sum, _, err := f.apply(ctx, cfg, func(o *ApplyOptions) {
		o.Janitor = janitor
		o.Hooks[0].(*recorder).onProg = func(e NodeProgressEvent) {
			if e.Totals.SessionID != "" {
				once.Do(func() {
					// Called from apply's goroutine: run it aside, as the signal handler would.
					go func() {
						errs := janitor.Now(20 * time.Second)
						cleaned <- errs
						cancel()
					}()
				})
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if errs := <-cleaned; len(errs) != 0 {
		t.Errorf("janitor: %v", errs)
	}
	f.assertClean(sum.RunID)
	run, _ := f.ledgerRun(sum.RunID)
	if run.Status != ledger.RunCancelled {
		t.Errorf("run status %s, want cancelled", run.Status)
	}
}

// TestApplyWorkers: a worker without new commits succeeds with commit = the cloned commit and nothing pushed; a
// worker that commits has its commit pushed by the host broker to its branch, and a downstream node checks that
// commit out.
func TestApplyWorkers(t *testing.T) {
	f := newFixture(t)
	cfg := f.config(`
node "%[1]sidle" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  ref    = "main"
  prompt = "mode=succeed"
}
node "%[1]swriter" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  ref    = "main"
  branch = "kew/writer"
  prompt = "mode=commit\nfile=WRITER.md\ncontent=hello"
}
node "%[1]scheck" {
  runner = "claude-code"
  role   = "reviewer"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  ref    = node.%[1]swriter.commit
  prompt = "mode=verdict"
}
`)
	sum, _, err := f.apply(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	idle, writer, check := resultOf(t, sum, f.node("idle")), resultOf(t, sum, f.node("writer")), resultOf(t, sum, f.node("check"))
	if idle.Status != ledger.StatusSucceeded || idle.Pushed || idle.Commit != idle.BaseCommit {
		t.Errorf("idle worker: %s (%s), pushed %v, commit %s base %s", idle.Status, idle.Reason, idle.Pushed, idle.Commit, idle.BaseCommit)
	}
	if writer.Status != ledger.StatusSucceeded || !writer.Pushed || writer.Commit == writer.BaseCommit || writer.Branch != "kew/writer" {
		t.Fatalf("writer: %s (%s), pushed %v, commit %s, branch %q", writer.Status, writer.Reason, writer.Pushed, writer.Commit, writer.Branch)
	}
	out, err := exec.Command("git", "-C", f.repo, "rev-parse", "refs/heads/kew/writer").Output()
	if err != nil || strings.TrimSpace(string(out)) != writer.Commit {
		t.Errorf("remote branch kew/writer = %q (%v), want %s", out, err, writer.Commit)
	}
	if check.Status != ledger.StatusApproved || check.BaseCommit != writer.Commit {
		t.Errorf("check: %s (%s), checked out %s, want %s", check.Status, check.Reason, check.BaseCommit, writer.Commit)
	}
}

// A negative MinFreeBytes is refused before anything starts.
func TestApplyNegativeMinFree(t *testing.T) {
	if _, err := Apply(context.Background(), ApplyOptions{Plan: &planner.Plan{}, StateDir: t.TempDir(), MinFreeBytes: -1}); err == nil || !strings.Contains(err.Error(), "MinFreeBytes") {
		t.Errorf("Apply with a negative MinFreeBytes = %v, want an error naming it", err)
	}
}
