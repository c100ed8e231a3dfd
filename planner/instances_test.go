package planner_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/planner"
)

// expectRE finds the expected diagnostics written inline, Terraform internal/configs style: `# ERROR: <summary>`
// on the line where the diagnostic's range starts.
var expectRE = regexp.MustCompile(`# (ERROR|WARNING): ([^#\n]*[^#\s])`)

// TestInstanceErrors loads and plans each testdata/instance-errors/*.hcl the way `kewplan plan` does and
// compares every diagnostic (file:line, severity, summary) with the file's `# ERROR:` comments.
func TestInstanceErrors(t *testing.T) {
	files, _ := filepath.Glob("testdata/instance-errors/*.hcl")
	if len(files) == 0 {
		t.Fatal("no fixtures")
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".hcl"), func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			sc := bufio.NewScanner(bytes.NewReader(src))
			for line := 1; sc.Scan(); line++ {
				for _, m := range expectRE.FindAllSubmatch(sc.Bytes(), -1) {
					want = append(want, fmt.Sprintf("%d: %s: %s", line, m[1], m[2]))
				}
			}
			diags := planFile(t, f)
			var got []string
			for _, d := range diags {
				sev := "ERROR"
				if d.Severity == hcl.DiagWarning {
					sev = "WARNING"
				}
				line := 0
				if d.Subject != nil {
					line = d.Subject.Start.Line
				}
				if strings.HasSuffix(d.Summary, ".") || d.Detail == "" || !strings.HasSuffix(d.Detail, ".") {
					t.Errorf("%s: not house style (summary without full stop, detail of whole sentences): %q", d.Summary, d.Detail)
				}
				got = append(got, fmt.Sprintf("%d: %s: %s", line, sev, d.Summary))
			}
			sort.Strings(want)
			sort.Strings(got)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("diagnostics mismatch (-want +got):\n%s\nall:\n%s", diff, diags.Error())
			}
		})
	}
}

// planFile is `kewplan plan FILE`: the diagnostics of loading, resolving variables and planning.
func planFile(t *testing.T, path string) hcl.Diagnostics {
	t.Helper()
	cfg, diags := config.Load(path)
	if diags.HasErrors() {
		return diags
	}
	vars, d := cfg.ResolveVariables(config.VariableInputs{})
	if d.HasErrors() {
		return d
	}
	_, d = planner.Build(cfg, planner.Inputs{Vars: vars, FS: os.DirFS(cfg.Dir)})
	return d
}

// TestReplanInstance is what apply does once fix["api"] finished: it plans review["api"] again with that
// instance's outputs, by address, and gets the same container name and the ref now known.
func TestReplanInstance(t *testing.T) {
	cfg, diags := config.Load("testdata/for-each-outputs")
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	in := planner.Inputs{FS: os.DirFS(cfg.Dir)}
	full, diags := planner.Build(cfg, in)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	in.Targets = []string{`review["api"]`}
	in.Outputs = map[string]map[string]cty.Value{`fix["api"]`: {"commit": cty.StringVal("0a1b2c3d"), "branch": cty.StringVal("kew/lint-api")}}
	p, diags := planner.Build(cfg, in)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	got, want := p.Node(`review["api"]`), full.Node(`review["api"]`)
	if got == nil || want == nil {
		t.Fatalf("review[\"api\"] missing: replan %v, full %v", got, want)
	}
	if got.Ref != "0a1b2c3d" || len(got.Unknown) != 0 {
		t.Errorf("replanned ref = %q, unknown %v; want the commit of fix[\"api\"]", got.Ref, got.Unknown)
	}
	if got.Slug != "review-api" || got.Container.Name != want.Container.Name || got.Branch != want.Branch {
		t.Errorf("replan names differ: slug %q container %q branch %q; full plan %q %q", got.Slug, got.Container.Name, got.Branch, want.Container.Name, want.Branch)
	}
	if diff := cmp.Diff([]string{`fix["api"]`}, got.DependsOn); diff != "" {
		t.Errorf("review[\"api\"] DependsOn mismatch (-want +got):\n%s", diff)
	}
	if p.Node(`review["web"]`) != nil || p.Node(`fix["web"]`) != nil {
		t.Error("the replan of one instance planned other instances")
	}
}
