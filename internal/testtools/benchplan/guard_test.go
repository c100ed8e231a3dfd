package benchplan

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/plandiff"
	"github.com/kewplan/kewplan/planfile"
	"github.com/kewplan/kewplan/planner"
	"github.com/kewplan/kewplan/policyrules"
	"github.com/kewplan/kewplan/views"
)

// The allocation guards: what `plan --json`, `show` and `diff` allocate per node of a generated configuration,
// counted (the runtime's memory statistics are deterministic where time is not) and held to the budgets below.
// A budget is the figure measured when it was written with about 10% room, per node of the 1,000-node
// configurations (a figure that includes the command's fixed costs, small against 1,000 nodes). A change that
// costs more per node pays its way under the budget, or raises it in a commit that says why.
//
// The figures are counted with GOMAXPROCS 2, so that a machine with more cores (more parallel pieces) counts the
// same. Under the race detector sync.Pool drops objects at random, so counts and bytes vary from run to run and
// are not compared (see raceEnabled): `go test -race` runs the commands and checks nothing but that they work.

// allocBudget is a budget per node: allocations (mallocs) and bytes allocated.
type allocBudget struct {
	allocs float64
	bytes  float64
}

// Budgets, per node of 1,000, about 10% over what was measured (allocs · bytes): plan --json of the chain
// 243.3 · 47.1 kB, the fan-out 237.4 · 50.4 kB, the for_each fan-out 118.4 · 28.1 kB; show of the saved chain
// 820.3 · 99.5 kB; diff of two chains 646.6 · 71.5 kB. Reading a plan strictly (internal/strictjson's scan for
// duplicate, case-folded and unknown keys before the decode) costs about 60 allocations and 3 kB per node of show:
// a scan through encoding/json's tokens cost 1,230 and 26 kB there (show 1,989.2 · 122.6 kB, diff 2,984.8 ·
// 117.8 kB). (Before a snippet's context stopped parsing the whole file again, plan --json of the chain was
// 375.6 · 75.6 kB.)
var (
	planBudgets = map[string]allocBudget{
		"chain":   {allocs: 260, bytes: 51_000},
		"fanout":  {allocs: 255, bytes: 54_500},
		"foreach": {allocs: 122, bytes: 30_000},
	}
	showBudget = allocBudget{allocs: 900, bytes: 110_000}
	diffBudget = allocBudget{allocs: 715, bytes: 79_000}
)

// guardNodes is the size of the guarded configurations. diff of two 10,000-node chains makes the same
// allocations per node as of two 1,000-node ones (552.7 against 553.2) and 18% more bytes per node (76.3 kB:
// buffers that grow by doubling), so the guard diffs 1,000-node plans and takes seconds, not a minute. Under the race detector, which compares
// nothing, 100 nodes run the same code paths in a fraction of the time.
var guardNodes = map[bool]int{false: 1000, true: 100}[raceEnabled]

// measure runs f once to warm it up, then twice more, and returns the fewest allocations and bytes of one run
// per node (the fewest: a finaliser or a background goroutine of an earlier test can only add).
func measure(t *testing.T, nodes int, f func()) (allocs, bytes float64) {
	t.Helper()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	f()
	allocs, bytes = -1, -1
	for range 2 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		a := float64(after.Mallocs-before.Mallocs) / float64(nodes)
		b := float64(after.TotalAlloc-before.TotalAlloc) / float64(nodes)
		if allocs < 0 || a < allocs {
			allocs = a
		}
		if bytes < 0 || b < bytes {
			bytes = b
		}
	}
	return allocs, bytes
}

// checkBudget fails when a figure is over its budget, saying by how much and how to find what grew.
func checkBudget(t *testing.T, what, profile string, allocs, bytes float64, budget allocBudget) {
	t.Helper()
	t.Logf("%s: %.1f allocations and %.0f bytes per node (budget %.0f and %.0f)", what, allocs, bytes, budget.allocs, budget.bytes)
	if raceEnabled {
		t.Logf("not compared with the budget under the race detector (sync.Pool drops objects at random there); run the test without -race")
		return
	}
	var over []string
	if allocs > budget.allocs {
		over = append(over, fmt.Sprintf("%.1f allocations per node, %.0f%% over the budget of %.0f", allocs, 100*(allocs/budget.allocs-1), budget.allocs))
	}
	if bytes > budget.bytes {
		over = append(over, fmt.Sprintf("%.0f bytes per node, %.0f%% over the budget of %.0f", bytes, 100*(bytes/budget.bytes-1), budget.bytes))
	}
	if len(over) > 0 {
		t.Errorf("%s allocates %s.\nFind what grew with an allocation profile:\n"+
			"  go test -count=1 -run '%s' -memprofile mem.out -memprofilerate 512 ./internal/testtools/benchplan\n"+
			"  go tool pprof -sample_index=alloc_space -top mem.out   (alloc_objects for counts; -base an older profile)\n"+
			"and compare with the parent commit. If the cost is the feature's own, raise the budget in guard_test.go in a\n"+
			"commit that says why.", what, strings.Join(over, " and "), profile)
	}
}

// planJSON is `kewplan plan --json DIR` in process: load, variables, plan, the deferred value check, the
// document and its JSON to w.
func planJSON(t testing.TB, dir string, w io.Writer) (*jsonplan.Document, *planner.Plan) {
	cfg, diags := config.LoadForPlanning(dir)
	if diags.HasErrors() {
		t.Fatalf("load %s: %s", dir, diags.Error())
	}
	vars, diags := cfg.ResolveVariables(config.VariableInputs{})
	if diags.HasErrors() {
		t.Fatalf("variables: %s", diags.Error())
	}
	p, planDiags := planner.Build(cfg, planner.Inputs{Vars: vars, FS: config.DirFS(cfg.Dir)})
	if planDiags.HasErrors() {
		t.Fatalf("plan: %s", planDiags.Error())
	}
	d := cfg.CheckValues(p.PlannedBlocks())
	if d.HasErrors() {
		t.Fatalf("check values: %s", d.Error())
	}
	p.Diagnostics = config.DedupeDiagnostics(append(append(append(hcl.Diagnostics{}, diags...), d...), planDiags...))
	config.SortDiagnostics(p.Diagnostics)
	doc := jsonplan.NewDocument(p, "guard", cfg.Files, cfg.VarFiles)
	doc.SetEngine(config.EngineDocker, nil, nil)
	// plan judges the policies' rules; a configuration without any must not pay for them.
	if res := policyrules.Evaluate(policyrules.Rules(cfg.Policy), policyrules.Input{Plan: doc}); len(res.Findings) > 0 {
		t.Fatalf("policy rules found %d findings in a configuration without rules", len(res.Findings))
	}
	if w != nil {
		view, err := views.NewPlan("json", views.Streams{Stdout: w, Stderr: io.Discard}, views.SARIFOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := view.Plan(doc); err != nil {
			t.Fatal(err)
		}
	}
	return doc, p
}

// TestPlanAllocations: `plan --json` of the chain, the fan-out and the for_each fan-out of 1,000 nodes.
func TestPlanAllocations(t *testing.T) {
	for _, shape := range Shapes {
		t.Run(shape, func(t *testing.T) {
			dir := t.TempDir()
			if err := Write(dir, shape, guardNodes); err != nil {
				t.Fatal(err)
			}
			allocs, bytes := measure(t, guardNodes, func() { planJSON(t, dir, io.Discard) })
			checkBudget(t, "plan --json of the "+shape, "TestPlanAllocations/"+shape, allocs, bytes, planBudgets[shape])
		})
	}
}

// TestShowAllocations: `show` of a saved plan of the 1,000-node chain: read, the document's own checks, the
// staleness check and the re-plan it is compared with, the human rendering.
func TestShowAllocations(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, "chain", guardNodes); err != nil {
		t.Fatal(err)
	}
	doc, p := planJSON(t, dir, nil)
	saved := filepath.Join(t.TempDir(), "chain.plan")
	if err := planfile.Write(saved, doc, p, planfile.Origin{Config: dir}); err != nil {
		t.Fatal(err)
	}
	show := func() {
		f, err := planfile.Read(saved)
		if err != nil {
			t.Fatal(err)
		}
		if problems := plandiff.CheckDocument(f.Doc); len(problems) > 0 {
			t.Fatalf("CheckDocument: %v", problems)
		}
		if _, _, err := f.Reload(); err != nil {
			t.Fatalf("Reload: %v", err)
		}
		view, err := views.NewShow("human", views.Streams{Stdout: io.Discard, Stderr: io.Discard}, views.SARIFOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := view.Plan(f.Doc); err != nil {
			t.Fatal(err)
		}
	}
	allocs, bytes := measure(t, guardNodes, show)
	checkBudget(t, "show of a saved plan of the chain", "TestShowAllocations", allocs, bytes, showBudget)
}

// TestDiffAllocations: `diff` of two plans of the 1,000-node chain whose claude-code nodes changed model: decode
// both, compare, render for people.
func TestDiffAllocations(t *testing.T) {
	base, head := diffPlans(t, guardNodes)
	allocs, bytes := measure(t, guardNodes, func() { diffOnce(t, base, head) })
	checkBudget(t, "diff of two plans of the chain", "TestDiffAllocations", allocs, bytes, diffBudget)
}

// diffPlans are the plan --json documents, as bytes, of the chain of n nodes and of the same chain with
// another model for its claude-code nodes.
func diffPlans(t testing.TB, n int) (base, head []byte) {
	src, err := Generate("chain", n)
	if err != nil {
		t.Fatal(err)
	}
	plan := func(src string) []byte {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		planJSON(t, dir, &buf)
		return buf.Bytes()
	}
	return plan(src), plan(strings.Replace(src, `"claude-sonnet-4-5"`, `"claude-opus-4-1"`, 1))
}

func diffOnce(t testing.TB, base, head []byte) {
	b, err := plandiff.DecodePlan(base, "base.json")
	if err != nil {
		t.Fatal(err)
	}
	h, err := plandiff.DecodePlan(head, "head.json")
	if err != nil {
		t.Fatal(err)
	}
	d := plandiff.Compare("base.json", b, "head.json", h)
	view, err := views.NewDiff("human", views.Streams{Stdout: io.Discard, Stderr: io.Discard}, views.DiffOptions{KewplanVersion: "guard"})
	if err != nil {
		t.Fatal(err)
	}
	if err := view.Diff(d); err != nil {
		t.Fatal(err)
	}
}
