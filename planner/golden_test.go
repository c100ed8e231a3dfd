package planner_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/internal/testtools/golden"
	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/planner"
	"github.com/kewplan/kewplan/views"
)

// goldenCase is testdata/<case>/case.json: the inputs besides the configuration, and the extra views to check.
type goldenCase struct {
	Targets []string                     `json:"targets"`
	Vars    []string                     `json:"vars"`
	Outputs map[string]map[string]string `json:"outputs"`
	// Views lists the extra golden files beyond plan.json and plan.txt: "markdown" (plan.md), "dot" (graph.dot).
	Views []string `json:"views"`
}

const testVersion = "0.0.0-test"

// planCase loads and plans testdata/<name> the way `kewplan plan` does.
func planCase(t *testing.T, dir string) (*config.Config, *planner.Plan, goldenCase) {
	t.Helper()
	var gc goldenCase
	if b, err := os.ReadFile(filepath.Join(dir, "case.json")); err == nil {
		if err := json.Unmarshal(b, &gc); err != nil {
			t.Fatalf("%s/case.json: %v", dir, err)
		}
	}
	cfg, diags := config.Load(dir)
	if diags.HasErrors() {
		t.Fatalf("config.Load(%s): %s", dir, diags.Error())
	}
	vars, diags := cfg.ResolveVariables(config.VariableInputs{Vars: gc.Vars})
	if diags.HasErrors() {
		t.Fatalf("ResolveVariables: %s", diags.Error())
	}
	in := planner.Inputs{Vars: vars, FS: os.DirFS(cfg.Dir), Targets: gc.Targets}
	if gc.Outputs != nil {
		in.Outputs = map[string]map[string]cty.Value{}
		for node, outs := range gc.Outputs {
			in.Outputs[node] = map[string]cty.Value{}
			for k, v := range outs {
				in.Outputs[node][k] = cty.StringVal(v)
			}
		}
	}
	p, _ := planner.Build(cfg, in)
	return cfg, p, gc
}

// TestGolden plans every testdata/<case>/ and compares each view with its golden file.
func TestGolden(t *testing.T) {
	dirs, err := filepath.Glob("testdata/*/main.hcl")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no golden cases: %v", err)
	}
	for _, main := range dirs {
		dir := filepath.Dir(main)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			cfg, p, gc := planCase(t, dir)
			doc := jsonplan.NewDocument(p, testVersion, cfg.Files)
			render := func(r func(*bytes.Buffer) error) []byte {
				var buf bytes.Buffer
				if err := r(&buf); err != nil {
					t.Fatal(err)
				}
				return buf.Bytes()
			}
			golden.Check(t, filepath.Join(dir, "plan.json"), render(func(b *bytes.Buffer) error { return views.WritePlanJSON(b, doc) }))
			golden.Check(t, filepath.Join(dir, "plan.txt"), render(func(b *bytes.Buffer) error { return views.WritePlanHuman(b, doc) }))
			for _, v := range gc.Views {
				switch v {
				case "markdown":
					golden.Check(t, filepath.Join(dir, "plan.md"), render(func(b *bytes.Buffer) error { return views.WritePlanMarkdown(b, doc) }))
				case "dot":
					golden.Check(t, filepath.Join(dir, "graph.dot"), render(func(b *bytes.Buffer) error { return views.WriteGraphDOT(b, doc) }))
				default:
					t.Fatalf("case.json: unknown view %q", v)
				}
			}
			// Planning is deterministic: a second Build renders the same bytes.
			_, p2, _ := planCase(t, dir)
			doc2 := jsonplan.NewDocument(p2, testVersion, cfg.Files)
			var a, b bytes.Buffer
			_ = views.WritePlanJSON(&a, doc)
			_ = views.WritePlanJSON(&b, doc2)
			if !bytes.Equal(a.Bytes(), b.Bytes()) {
				t.Errorf("two plans of %s differ", dir)
			}
		})
	}
}

// expectedErrors reads the `# ERROR: <rule-id>` comments of a configuration: rule id -> lines that carry one.
func expectedErrors(t *testing.T, path string) map[string][]int {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]int{}
	for i, line := range strings.Split(string(src), "\n") {
		_, after, ok := strings.Cut(line, "# ERROR: ")
		if !ok {
			continue
		}
		id := strings.Fields(after)[0]
		out[id] = append(out[id], i+1)
	}
	return out
}

// TestInvalidExamples plans each examples/invalid/<rule>.hcl: it must fail with that rule, at every line marked
// `# ERROR: <rule>`, and with no error of another rule.
func TestInvalidExamples(t *testing.T) {
	files, _ := filepath.Glob("../examples/invalid/*.hcl")
	if len(files) == 0 {
		t.Fatal("no examples/invalid/*.hcl")
	}
	covered := map[string]bool{}
	for _, path := range files {
		rule := strings.TrimSuffix(filepath.Base(path), ".hcl")
		covered[rule] = true
		t.Run(rule, func(t *testing.T) {
			cfg, diags := config.Load(path)
			if diags.HasErrors() {
				t.Fatalf("config.Load: %s", diags.Error())
			}
			vars, diags := cfg.ResolveVariables(config.VariableInputs{})
			if diags.HasErrors() {
				t.Fatalf("ResolveVariables: %s", diags.Error())
			}
			p, diags := planner.Build(cfg, planner.Inputs{Vars: vars, FS: os.DirFS(cfg.Dir)})
			if !p.HasErrors() {
				t.Fatalf("%s plans without errors", path)
			}
			got := map[string][]int{}
			for _, d := range diags {
				if d.Severity != hcl.DiagError {
					continue
				}
				id := planner.DiagnosticRuleID(d)
				if id == "" {
					t.Errorf("error without a rule id: %s: %s", d.Summary, d.Detail)
					continue
				}
				line := 0
				if d.Subject != nil {
					line = d.Subject.Start.Line
				}
				got[id] = append(got[id], line)
			}
			for _, lines := range got {
				sort.Ints(lines)
			}
			want := expectedErrors(t, path)
			if len(want[rule]) == 0 {
				t.Fatalf("%s marks no line with # ERROR: %s", path, rule)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("rule ids and lines mismatch (-want +got):\n%s", diff)
			}
		})
	}
	for _, r := range planner.Rules() {
		if r.Severity == planner.SeverityError && !strings.HasPrefix(r.ID, "policy-") && !covered[r.ID] {
			t.Errorf("examples/invalid has no %s.hcl", r.ID)
		}
	}
}

// TestExamplesPlanCleanly plans every examples/*.hcl (and example directory) without an error.
func TestExamplesPlanCleanly(t *testing.T) {
	files, _ := filepath.Glob("../examples/*.hcl")
	dirs, _ := filepath.Glob("../examples/*/*.hcl")
	for _, d := range dirs {
		if dir := filepath.Dir(d); filepath.Base(dir) != "invalid" && filepath.Base(dir) != "prompts" && !contains(files, dir) {
			files = append(files, dir)
		}
	}
	if len(files) == 0 {
		t.Fatal("found no example configurations under ../examples")
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			cfg, diags := config.Load(path)
			if diags.HasErrors() {
				t.Fatalf("config.Load: %s", diags.Error())
			}
			vars, diags := cfg.ResolveVariables(config.VariableInputs{})
			if diags.HasErrors() {
				t.Fatalf("ResolveVariables: %s", diags.Error())
			}
			p, diags := planner.Build(cfg, planner.Inputs{Vars: vars, FS: os.DirFS(cfg.Dir)})
			if p.HasErrors() {
				t.Errorf("%s does not plan cleanly: %s", path, diags.Error())
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
