package planfile_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/zclconf/go-cty/cty"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/planfile"
	"github.com/kewplan/kewplan/planner"
)

const savedConfig = `
sandbox {
  memory = "4g"
  images = { claude-code = "kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4" }
}

variable "model" {
  type = string
}

variable "tags" {
  type    = list(string)
  default = ["a", "b"]
}

node "fix" {
  runner = "claude-code"
  model  = var.model
  repo   = "https://github.com/acme/widgets.git"
  prompt = templatefile("prompts/fix.tmpl", { tags = var.tags })
}
`

// savePlan plans dir with model=m and saves the plan under dir/plans/, returning the plan file's path.
func savePlan(t *testing.T, dir string) string {
	t.Helper()
	cfg, diags := config.Load(dir)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	vars, diags := cfg.ResolveVariables(config.VariableInputs{Vars: []string{"model=claude-opus-4-1"}})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	p, diags := planner.Build(cfg, planner.Inputs{Vars: vars, FS: config.DirFS(cfg.Dir)})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	doc := jsonplan.NewDocument(p, "test", cfg.Files)
	path := filepath.Join(dir, "plans", "fix.plan")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := planfile.Write(path, doc, p, planfile.Origin{Config: dir}); err != nil {
		t.Fatal(err)
	}
	return path
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSavedPlanStaleness(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, dir, planPath string)
		want   string // "" when the plan stays fresh
	}{
		{name: "unchanged", change: func(*testing.T, string, string) {}},
		{name: "template edited", want: "prompts/fix.tmpl changed", change: func(t *testing.T, dir, _ string) {
			writeFiles(t, dir, map[string]string{"prompts/fix.tmpl": "Something else."})
		}},
		{name: "template removed", want: "prompts/fix.tmpl was removed", change: func(t *testing.T, dir, _ string) {
			os.Remove(filepath.Join(dir, "prompts/fix.tmpl"))
		}},
		{name: "configuration edited", want: "main.hcl changed", change: func(t *testing.T, dir, _ string) {
			writeFiles(t, dir, map[string]string{"main.hcl": savedConfig + "\n# a comment\n"})
		}},
		{name: "configuration file added", want: "configuration file extra.hcl was added", change: func(t *testing.T, dir, _ string) {
			writeFiles(t, dir, map[string]string{"extra.hcl": "locals {\n  x = 1\n}\n"})
		}},
		{name: "variable value edited in the plan file", want: "the plan file was edited", change: func(t *testing.T, _, planPath string) {
			b := readPlain(t, planPath)
			i := strings.LastIndex(string(b), "claude-opus-4-1") // in saved.variables, after the nodes
			b = []byte(string(b[:i]) + "claude-haiku-4-5" + string(b[i+len("claude-opus-4-1"):]))
			os.WriteFile(planPath, b, 0o600)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"main.hcl": savedConfig, "prompts/fix.tmpl": "Fix it. Tags: ${join(\",\", tags)}"})
			planPath := savePlan(t, dir)
			tt.change(t, dir, planPath)
			f, err := planfile.ReadSaved(planPath)
			if err != nil {
				t.Fatal(err)
			}
			err = f.CheckStale()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("CheckStale() = %v, want nil", err)
			case tt.want != "" && err == nil:
				t.Fatalf("CheckStale() = nil, want an error with %q", tt.want)
			case tt.want != "":
				if !errors.Is(err, planfile.ErrStale) || !strings.Contains(err.Error(), tt.want) ||
					!strings.HasPrefix(err.Error(), "Saved plan is stale: ") {
					t.Errorf("CheckStale() = %q, want ErrStale mentioning %q", err, tt.want)
				}
			}
		})
	}
}

// A saved plan is a superset of the plan --json document, records its configuration relative to itself, and
// restores the exact variable values for apply.
func TestSavedPlanContents(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"main.hcl": savedConfig, "prompts/fix.tmpl": "Fix it. Tags: ${join(\",\", tags)}"})
	planPath := savePlan(t, dir)
	info, err := os.Stat(planPath)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Errorf("plan file mode = %v, want 0600 (variable values may be secrets)", perm)
	}
	f, err := planfile.ReadSaved(planPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := f.Doc
	if doc.Saved.ConfigPath != ".." {
		t.Errorf("config_path = %q, want \"..\" (relative to the plan file)", doc.Saved.ConfigPath)
	}
	var names []string
	for _, f := range doc.Saved.Files {
		names = append(names, f.Kind+":"+f.Name)
	}
	if diff := cmp.Diff([]string{"config:main.hcl", "read:prompts/fix.tmpl"}, names); diff != "" {
		t.Errorf("saved files mismatch (-want +got):\n%s", diff)
	}
	vars, err := doc.Saved.Vars()
	if err != nil {
		t.Fatal(err)
	}
	if !vars["model"].RawEquals(cty.StringVal("claude-opus-4-1")) {
		t.Errorf("model = %#v", vars["model"])
	}
	if want := cty.ListVal([]cty.Value{cty.StringVal("a"), cty.StringVal("b")}); !vars["tags"].RawEquals(want) {
		t.Errorf("tags = %#v, want %#v", vars["tags"], want)
	}
	// Every key of the plan --json document is in the saved plan.
	raw := readPlain(t, planPath)
	var saved map[string]json.RawMessage
	if err := json.Unmarshal(raw, &saved); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"format_version", "kewplan_version", "config_digest", "nodes", "exposure", "diagnostics", "saved"} {
		if _, ok := saved[key]; !ok {
			t.Errorf("saved plan lacks %q", key)
		}
	}
	// Re-planning from the saved state gives the same digest and argv.
	cfg, in, err := f.Load()
	if err != nil {
		t.Fatal(err)
	}
	p, _ := planner.Build(cfg, in)
	if p.ConfigDigest != doc.ConfigDigest {
		t.Errorf("re-planned digest %s, saved %s", p.ConfigDigest, doc.ConfigDigest)
	}
	if diff := cmp.Diff(doc.Nodes[0].Argv, p.Nodes[0].Container.Argv()); diff != "" {
		t.Errorf("re-planned argv mismatch (-saved +replanned):\n%s", diff)
	}
}

// Reload re-plans a saved plan for apply, and refuses one whose nodes were edited after it was saved.
func TestReload(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"main.hcl": savedConfig, "prompts/fix.tmpl": "Fix it."})
	planPath := savePlan(t, dir)
	f, err := planfile.ReadSaved(planPath)
	if err != nil {
		t.Fatal(err)
	}
	_, p, err := f.Reload()
	if err != nil {
		t.Fatalf("Reload() = %v", err)
	}
	if p.Nodes[0].Container == nil || p.Nodes[0].Prompt.Text != "Fix it." {
		t.Fatalf("Reload() planned %+v", p.Nodes[0])
	}
	b := readPlain(t, planPath)
	b = []byte(strings.Replace(string(b), `"-e",`, `"-e", "GITHUB_TOKEN", "-e",`, 1))
	os.WriteFile(planPath, b, 0o600)
	f, err = planfile.ReadSaved(planPath)
	if err != nil {
		t.Fatal(err)
	}
	// The nodes digest catches the edit without the configuration.
	if err := f.CheckIntegrity(); !errors.Is(err, planfile.ErrMismatch) || !strings.Contains(err.Error(), "nodes_digest") {
		t.Errorf("CheckIntegrity() of an edited plan = %v, want ErrMismatch naming the nodes_digest", err)
	}
	if _, _, err := f.Reload(); !errors.Is(err, planfile.ErrMismatch) {
		t.Errorf("Reload() of an edited plan = %v, want ErrMismatch", err)
	}
	// Without the digest, the plan is refused as it is: every plan file kewplan writes has one.
	f.Doc.Saved.NodesDigest = ""
	if _, _, err := f.Reload(); !errors.Is(err, planfile.ErrMismatch) || !strings.Contains(err.Error(), "no nodes_digest") {
		t.Errorf("Reload() of a plan without nodes_digest = %v, want ErrMismatch naming it", err)
	}
	// An editor who recomputed the digest meets the re-plan, which names the node and what differs.
	c := *f.Doc
	c.Saved = nil
	var whole bytes.Buffer
	enc := json.NewEncoder(&whole)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&c); err != nil {
		t.Fatal(err)
	}
	f.Doc.Saved.NodesDigest = planner.SHA256Hex(whole.Bytes())
	if err := f.CheckIntegrity(); err != nil {
		t.Fatalf("CheckIntegrity() with a recomputed digest = %v", err)
	}
	_, _, err = f.Reload()
	if !errors.Is(err, planfile.ErrMismatch) || !strings.Contains(err.Error(), `node "fix"`) || !strings.Contains(err.Error(), "GITHUB_TOKEN") {
		t.Errorf("Reload() of an edited plan = %v, want ErrMismatch naming node \"fix\" and GITHUB_TOKEN", err)
	}
}

func TestReadSavedRefuses(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"plan.json":   `{"format_version":"1.0","nodes":[]}`,
		"future.json": `{"format_version":"2.0","nodes":[]}`,
		"junk.json":   `not json`,
	})
	for name, want := range map[string]string{
		"plan.json":   `it has no "saved" object`,
		"future.json": "plan format 2.0 is not supported",
		"junk.json":   "not a kewplan plan file",
		"none.json":   "no such file",
	} {
		_, err := planfile.ReadSaved(filepath.Join(dir, name))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ReadSaved(%s) = %v, want an error with %q", name, err, want)
		}
	}
}

// readPlain reads a saved plan's JSON (Write compresses it); tests that edit it write it back uncompressed, as
// a plan file written before compression is.
func readPlain(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if b, err = planfile.Decompress(b, planfile.MaxBytes); err != nil {
		t.Fatal(err)
	}
	return b
}
