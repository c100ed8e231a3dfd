package planfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/internal/termsafe"
	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/k8srender"
	"github.com/kewplan/kewplan/planner"
)

// saveExample plans an example (on the engine named, "" for none) and saves it in a temporary directory.
func saveExample(t *testing.T, example, engine string) string {
	t.Helper()
	src, err := filepath.Abs(filepath.Join("..", "examples", example))
	if err != nil {
		t.Fatal(err)
	}
	cfg, diags := config.Load(src)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	vars, diags := cfg.ResolveVariables(config.VariableInputs{})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	p, diags := planner.Build(cfg, planner.Inputs{Vars: vars, FS: config.DirFS(cfg.Dir)})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	doc := jsonplan.NewDocument(p, "test", cfg.Files)
	if engine == config.EngineKubernetes {
		e := cfg.Engine(config.EngineKubernetes).Kubernetes
		m, d := k8srender.Render(p, k8srender.Options{Engine: e})
		if d.HasErrors() {
			t.Fatal(d.Error())
		}
		doc.SetEngine(engine, m, e)
	} else if engine != "" {
		doc.SetEngine(engine, nil, nil)
	}
	path := filepath.Join(t.TempDir(), "saved.plan")
	if err := Write(path, doc, p, Origin{Config: src}); err != nil {
		t.Fatal(err)
	}
	return path
}

// forge edits a saved plan and writes it back with its nodes digest recomputed, as a forger would.
func forge(t *testing.T, path string, edit func(*jsonplan.Document)) string {
	t.Helper()
	f, err := ReadSaved(path)
	if err != nil {
		t.Fatal(err)
	}
	edit(f.Doc)
	saved := f.Doc.Saved
	if saved.NodesDigest != "" {
		if saved.NodesDigest, err = nodesDigest(f.Doc); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(filepath.Dir(path), "forged.plan")
	w, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := f.Doc.WriteIndented(w); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReloadComparesEverything: a plan file edited in any field show displays, its nodes digest recomputed, is
// refused by the re-plan, not only when the argv, image or credentials differ.
func TestReloadComparesEverything(t *testing.T) {
	review := saveExample(t, "review-pipeline.hcl", config.EngineDocker)
	demo := saveExample(t, "demo", config.EngineDocker) // raises a warning
	kube := saveExample(t, "kubernetes.hcl", config.EngineKubernetes)
	for _, path := range []string{review, demo, kube} {
		f, err := ReadSaved(path)
		if err != nil {
			t.Fatal(err)
		}
		if path == demo && len(f.Doc.Diagnostics) == 0 {
			t.Fatal("the demo raises no diagnostic to remove")
		}
		if _, _, err := f.Reload(); err != nil {
			t.Fatalf("%s as written: %v", path, err)
		}
	}
	for _, tc := range []struct {
		name, plan string
		edit       func(*jsonplan.Document)
		want       string
	}{
		{"role", review, func(d *jsonplan.Document) { d.Nodes[1].Role = "worker" }, "role"},
		{"node budget", review, func(d *jsonplan.Document) { d.Nodes[0].Budget.Timeout = "9h" }, "budget.timeout"},
		{"apply budget", review, func(d *jsonplan.Document) { d.Budget = nil }, "budget"},
		{"retry", review, func(d *jsonplan.Document) {
			d.Nodes[0].Retry = &jsonplan.RetryDocument{Attempts: 9, Backoff: "1s", On: []string{"exit"}, Origin: map[string]string{}}
		}, "retry"},
		{"pull request added", review, func(d *jsonplan.Document) {
			d.Nodes[0].PullRequest = &jsonplan.PullRequestDoc{Base: "main", Title: "Looks \x1b[31mfine"}
		}, "pull_request"},
		{"exposure", review, func(d *jsonplan.Document) { d.Exposure = map[string][]string{} }, "exposure"},
		{"isolation", review, func(d *jsonplan.Document) { d.Nodes[0].Isolation = "gVisor (runsc)" }, "isolation"},
		{"kubernetes namespace", kube, func(d *jsonplan.Document) { d.Kubernetes.Namespace = "prod" }, "kubernetes.namespace"},
		{"kubernetes dropped", kube, func(d *jsonplan.Document) { d.Kubernetes = nil }, "kubernetes"},
		{"engine", kube, func(d *jsonplan.Document) { d.Engine = config.EngineDocker }, ""},
		{"warning removed", demo, func(d *jsonplan.Document) { d.Diagnostics = d.Diagnostics[1:] }, "does not hold"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ReadSaved(forge(t, tc.plan, tc.edit))
			if err != nil {
				t.Fatal(err)
			}
			if err := f.CheckIntegrity(); err != nil {
				t.Fatalf("CheckIntegrity of a re-signed plan = %v; the test needs a forged digest", err)
			}
			_, _, err = f.Reload()
			if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Reload() = %v, want ErrMismatch naming %q", err, tc.want)
			}
			if termsafe.NeedsEscape(err.Error()) {
				t.Errorf("the error holds control characters: %q", err)
			}
		})
	}
}

// TestMissingNodesDigest: a plan file without a nodes digest is refused without its configuration at hand; it is
// an edited file, not an old one.
func TestMissingNodesDigest(t *testing.T) {
	path := forge(t, saveExample(t, "review-pipeline.hcl", config.EngineDocker), func(d *jsonplan.Document) {
		d.Saved.NodesDigest = ""
		d.Nodes[1].Role = "worker"
	})
	f, err := ReadSaved(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.CheckIntegrity(); !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "no nodes_digest") {
		t.Fatalf("CheckIntegrity() = %v, want ErrMismatch for the missing nodes_digest", err)
	}
}
