package config

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/hashicorp/hcl/v2"
)

// diagnosticLines is each diagnostic as severity, range, summary and detail, in order.
func diagnosticLines(diags hcl.Diagnostics) []string {
	out := make([]string, len(diags))
	for i, d := range diags {
		rng := "(no range)"
		if d.Subject != nil {
			rng = d.Subject.String()
		}
		out[i] = fmt.Sprintf("%d %s %s: %s", d.Severity, rng, d.Summary, d.Detail)
	}
	return out
}

// FuzzLoad feeds arbitrary bytes to Load and to everything validate does after it: it must never panic, and
// every error must be a diagnostic. Seeds live in testdata/fuzz/FuzzLoad; the fixtures and examples are added
// at run time.
func FuzzLoad(f *testing.F) {
	for _, pattern := range []string{"testdata/error-files/*.hcl", "testdata/valid-files/*.hcl", "../examples/*.hcl"} {
		files, _ := filepath.Glob(pattern)
		for _, name := range files {
			if src, err := os.ReadFile(name); err == nil {
				f.Add(src)
			}
		}
	}
	for _, s := range hostileHCLSeeds {
		f.Add([]byte(s))
	}
	fsys := fstest.MapFS{"prompts/fix.md": {Data: []byte("Fix it.")}, "t.tpl": {Data: []byte("${x}")}}
	// One directory per fuzzing process: each input overwrites the same file, which keeps executions cheap.
	dir := f.TempDir()
	name := filepath.Join(dir, "main.hcl")
	f.Fuzz(func(t *testing.T, src []byte) {
		limitStack()
		if err := os.WriteFile(name, src, 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, diags := Load(name)
		if cfg == nil {
			t.Fatal("Load returned a nil Config")
		}
		// Loading for planning and finishing the value check afterwards reports exactly what Load reports.
		deferred, ddiags := LoadForPlanning(name)
		if !ddiags.HasErrors() {
			ddiags = append(ddiags, deferred.CheckValues(nil)...)
			SortDiagnostics(ddiags)
		}
		if got, want := diagnosticLines(ddiags), diagnosticLines(diags); !slices.Equal(got, want) {
			t.Fatalf("LoadForPlanning then CheckValues(nil) reported\n%s\nLoad reported\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if diags.HasErrors() {
			return
		}
		vals, _ := cfg.ResolveVariables(VariableInputs{Vars: nil})
		ctx, _ := cfg.EvalContext(&Scope{Vars: vals, FS: fsys, Reads: &ReadLog{}})
		for _, n := range cfg.Nodes {
			EvalNode(n, ctx)
		}
		for _, r := range cfg.Runners {
			EvalRunnerArgs(r, ctx, "m")
		}
	})
}
