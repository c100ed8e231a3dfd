package planner_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/planner"
	"github.com/kewplan/kewplan/views"
)

// planJSON plans path the way `kewplan plan --json` does and returns the bytes.
func planJSON(t *testing.T, path string) []byte {
	t.Helper()
	cfg, diags := config.Load(path)
	if diags.HasErrors() {
		t.Fatalf("Load(%s): %v", path, diags)
	}
	vars, diags := cfg.ResolveVariables(config.VariableInputs{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	p, _ := planner.Build(cfg, planner.Inputs{Vars: vars, FS: config.DirFS(cfg.Dir)})
	var buf bytes.Buffer
	if err := views.WritePlanJSON(&buf, jsonplan.NewDocument(p, "test", cfg.Files)); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestPlanBytesDoNotDependOnThePath: the same configuration planned through a relative path, an absolute path and
// from a second checkout gives identical `plan --json` bytes, diagnostics and their snippets included.
func TestPlanBytesDoNotDependOnThePath(t *testing.T) {
	for _, rel := range []string{"../examples/quickstart.hcl", "../examples/review-pipeline.hcl", "testdata/rules", "testdata/warnings"} {
		t.Run(rel, func(t *testing.T) {
			abs, err := filepath.Abs(rel)
			if err != nil {
				t.Fatal(err)
			}
			want := planJSON(t, rel)
			if got := planJSON(t, abs); !bytes.Equal(want, got) {
				t.Errorf("plan --json via %s differs from via %s:\n%s\n---\n%s", abs, rel, want, got)
			}
			// A second checkout: the same files copied elsewhere.
			copyDir := t.TempDir()
			info, err := os.Stat(rel)
			if err != nil {
				t.Fatal(err)
			}
			srcDir, target := rel, copyDir
			if !info.IsDir() {
				srcDir, target = filepath.Dir(rel), filepath.Join(copyDir, filepath.Base(rel))
			}
			if err := os.CopyFS(copyDir, os.DirFS(srcDir)); err != nil {
				t.Fatal(err)
			}
			if got := planJSON(t, target); !bytes.Equal(want, got) {
				t.Errorf("plan --json from a second checkout differs:\n%s\n---\n%s", want, got)
			}
			if bytes.Contains(want, []byte(abs)) || bytes.Contains(want, []byte("../")) {
				t.Errorf("plan --json names a path outside the configuration's directory:\n%s", want)
			}
		})
	}
}
