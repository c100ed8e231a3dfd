package executor

// Test harness for the executor's tests against the real Docker engine, shared by every engine test of this
// package (apply, reviewers, smoke): the engine (skipped locally when absent, fatal under CI), the fake agent
// image (built once per test binary, cached in the engine by content hash), a test-unique internal network,
// local git repositories, configurations written as HCL, and a hook that records every event.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/executor/engine"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/statedir"
	"github.com/kewplan/kewplan/internal/testtools/testkit"
	"github.com/kewplan/kewplan/planner"
)

// testEngine connects to the engine, or skips (locally) / fails (CI set) with a clear message.
func testEngine(t testing.TB) *engine.Engine { return testkit.Engine(t) }

// testAgentImage is one test agent's image: a static Go program from testdata built into an image once per test
// binary, tagged by a hash of the binary and the recipe so an unchanged agent is never rebuilt across runs.
type testAgentImage struct {
	once sync.Once
	tag  string
	err  error
}

// get builds the Go package pkg (relative to executor/) as a static linux binary and, unless the engine already
// has the tag kewplan-test/<name>:<hash of binary and recipe>, makes the image with create.
func (a *testAgentImage) get(t testing.TB, eng *engine.Engine, name, pkg, recipe string, create func(ctx context.Context, tag string, bin []byte) error) string {
	t.Helper()
	a.once.Do(func() {
		dir, err := os.MkdirTemp("", "kewplan-"+name+"-")
		if err != nil {
			a.err = err
			return
		}
		defer os.RemoveAll(dir)
		binPath := filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w -buildid=", "-o", binPath, pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
		if out, err := cmd.CombinedOutput(); err != nil {
			a.err = fmt.Errorf("build %s: %v\n%s", pkg, err, out)
			return
		}
		bin, err := os.ReadFile(binPath)
		if err != nil {
			a.err = err
			return
		}
		sum := sha256.Sum256(append(bin, recipe...))
		tag := "kewplan-test/" + name + ":" + hex.EncodeToString(sum[:6])
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		a.tag = tag
		if _, err := eng.InspectImage(ctx, tag); err == nil {
			return
		}
		a.err = create(ctx, tag, bin)
	})
	if a.err != nil {
		t.Fatalf("%s image: %v", name, a.err)
	}
	return a.tag
}

// scratchAgentImage builds a FROM scratch image holding only the binary, running as 1001:1001 in /work.
func scratchAgentImage(t testing.TB, eng *engine.Engine, a *testAgentImage, name, pkg string) string {
	t.Helper()
	dockerfile := fmt.Sprintf("FROM scratch\nCOPY %[1]s /%[1]s\nUSER 1001:1001\nWORKDIR /work\nENTRYPOINT [\"/%[1]s\"]\n", name)
	return a.get(t, eng, name, pkg, dockerfile, func(ctx context.Context, tag string, bin []byte) error {
		return eng.BuildImage(ctx, tag, map[string][]byte{"Dockerfile": []byte(dockerfile), name: bin}, map[string]bool{name: true})
	})
}

var fakeAgent testAgentImage

// fakeAgentImage is executor/testdata/fakeagent in a FROM scratch image.
func fakeAgentImage(t testing.TB, eng *engine.Engine) string {
	t.Helper()
	return scratchAgentImage(t, eng, &fakeAgent, "fakeagent", "./testdata/fakeagent")
}

func randomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// testNetwork creates a test-unique --internal network, removed when the test ends.
func testNetwork(t testing.TB, eng *engine.Engine) string {
	t.Helper()
	name := "kewplan-test-" + randomSuffix()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := eng.CreateNetwork(ctx, name, true, map[string]string{"kewplan.test": "1"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := eng.RemoveNetwork(context.Background(), name); err != nil {
			t.Errorf("remove test network: %v", err)
		}
	})
	return name
}

// testRepo makes a local git repository with one commit on main (its objects loose, as the fake agent needs).
func testRepo(t testing.TB) string { return testkit.GitRepo(t) }

// fixture is one test configuration: its directory, the network and image it uses.
type fixture struct {
	t        testing.TB
	eng      *engine.Engine
	dir      string
	stateDir string
	image    string
	network  string
	repo     string
	prefix   string // node names are prefixed so parallel test packages never share container names
	// sandboxExtra is added to the sandbox block (e.g. `runtime = "runsc"`).
	sandboxExtra string
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	eng := testEngine(t)
	f := &fixture{t: t, eng: eng, dir: t.TempDir(), image: fakeAgentImage(t, eng), network: testNetwork(t, eng), repo: testRepo(t)}
	f.stateDir = filepath.Join(f.dir, statedir.DefaultName)
	f.prefix = "t" + randomSuffix() + "-"
	return f
}

// node returns the test-unique name of a node.
func (f *fixture) node(name string) string { return f.prefix + name }

// config writes main.hcl with a sandbox block for the fixture and the given node blocks (written with %[1]s for
// the node prefix, %[2]s for the repository) and loads it.
func (f *fixture) config(nodes string) *config.Config {
	f.t.Helper()
	src := fmt.Sprintf(`sandbox {
  network           = "allowlist"
  allowlist_network = %q
  memory            = "256m"
  cpus              = "1"
  pids_limit        = 128
  images = {
    "claude-code" = %q
  }
%s
}
`, f.network, f.image, f.sandboxExtra) + fmt.Sprintf(nodes, f.prefix, f.repo)
	path := filepath.Join(f.dir, "main.hcl")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		f.t.Fatal(err)
	}
	cfg, diags := config.Load(path)
	if diags.HasErrors() {
		f.t.Fatalf("load test configuration: %s\n%s", config.DiagnosticsText(diags), src)
	}
	return cfg
}

func (f *fixture) plan(cfg *config.Config) *planner.Plan {
	f.t.Helper()
	p, diags := planner.Build(cfg, planner.Inputs{Vars: map[string]cty.Value{}, FS: config.DirFS(cfg.Dir)})
	if diags.HasErrors() {
		f.t.Fatalf("plan: %s", config.DiagnosticsText(diags))
	}
	return p
}

// apply runs the configuration with a dummy credential and returns the summary and the recorded events.
func (f *fixture) apply(ctx context.Context, cfg *config.Config, tweak ...func(*ApplyOptions)) (*ApplySummary, *recorder, error) {
	f.t.Helper()
	rec := &recorder{}
	opts := ApplyOptions{
		Config: cfg, Vars: map[string]cty.Value{}, Plan: f.plan(cfg), StateDir: f.stateDir, Hooks: []Hook{rec},
		Environ: append(os.Environ(), "ANTHROPIC_API_KEY=sk-test-dummy-value"), KewplanVersion: "test",
		ProgressInterval: time.Millisecond, ProxyBinary: kewplanBin(f.t),
	}
	for _, fn := range tweak {
		fn(&opts)
	}
	sum, err := Apply(ctx, opts)
	return sum, rec, err
}

// assertClean checks the invariants every exit path must leave: no container of the run, no prompt file.
func (f *fixture) assertClean(runID string) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	left, err := f.eng.ListContainers(ctx, planner.LabelRun+"="+runID)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, c := range left {
		f.t.Errorf("container %s (%s) of run %s was left behind", c.Name, c.State, runID)
	}
	_ = filepath.Walk(f.stateDir, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Name() == planner.PromptFilename {
			f.t.Errorf("prompt file left behind: %s", p)
		}
		return nil
	})
}

// ledgerRun reads a run back from the fixture's ledger.
func (f *fixture) ledgerRun(runID string) (*ledger.RunRecord, map[string]ledger.NodeRecord) {
	f.t.Helper()
	l, err := ledger.Open(statedir.Dir{Root: f.stateDir}.Ledger())
	if err != nil {
		f.t.Fatal(err)
	}
	defer l.Close()
	run, nodes, err := l.Run(runID)
	if err != nil {
		f.t.Fatal(err)
	}
	byName := map[string]ledger.NodeRecord{}
	for _, n := range nodes {
		byName[n.Node] = n
	}
	return run, byName
}

// recorder is a Hook that keeps every event.
type recorder struct {
	NilHook
	mu       sync.Mutex
	events   []string
	starts   []NodeStartEvent
	progress []NodeProgressEvent
	done     []ledger.NodeResult
	warnings []WarningEvent
	summary  *ApplySummary
	onStart  func(NodeStartEvent)
	onProg   func(NodeProgressEvent)
}

func (r *recorder) NodeStart(e NodeStartEvent) {
	r.mu.Lock()
	r.events = append(r.events, "start "+e.Node)
	r.starts = append(r.starts, e)
	fn := r.onStart
	r.mu.Unlock()
	if fn != nil {
		fn(e)
	}
}

func (r *recorder) NodeProgress(e NodeProgressEvent) {
	r.mu.Lock()
	r.progress = append(r.progress, e)
	fn := r.onProg
	r.mu.Unlock()
	if fn != nil {
		fn(e)
	}
}

func (r *recorder) NodeDone(e ledger.NodeResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, "done "+e.Node+" "+e.Status)
	r.done = append(r.done, e)
}

func (r *recorder) Warning(e WarningEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.warnings = append(r.warnings, e)
}

func (r *recorder) ApplyDone(s ApplySummary) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.summary = &s
}

func (r *recorder) warningText() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, w := range r.warnings {
		b.WriteString(w.Message + "\n")
	}
	return b.String()
}

// resultOf finds a node's result in a summary.
func resultOf(t testing.TB, sum *ApplySummary, node string) ledger.NodeResult {
	t.Helper()
	for _, n := range sum.Nodes {
		if n.Node == node {
			return n
		}
	}
	t.Fatalf("node %s is not in the summary", node)
	return ledger.NodeResult{}
}
