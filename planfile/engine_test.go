package planfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/internal/testtools/k8stest"
	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/k8srender"
	"github.com/kewplan/kewplan/planfile"
)

// A saved kubernetes plan records its engine and the settings it was rendered with; they are covered by the nodes
// digest, so an edited namespace is caught. A plan without an engine is a Docker plan.
func TestSavedPlanEngine(t *testing.T) {
	cfg, p, ok := k8stest.Plan(t, "../examples/kubernetes.hcl")
	if !ok {
		t.Fatal("the Kubernetes example does not plan cleanly")
	}
	e := cfg.Engine(config.EngineKubernetes).Kubernetes
	m, diags := k8srender.Render(p, k8srender.Options{Engine: e})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	dir := t.TempDir()
	save := func(name, engine string) *planfile.File {
		doc := jsonplan.NewDocument(p, "test")
		doc.SetEngine(engine, m, e)
		path := filepath.Join(dir, name)
		if err := planfile.Write(path, doc, p, planfile.Origin{Config: "../examples/kubernetes.hcl"}); err != nil {
			t.Fatal(err)
		}
		f, err := planfile.ReadSaved(path)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}

	f := save("k8s.plan", config.EngineKubernetes)
	if f.Engine() != config.EngineKubernetes {
		t.Fatalf("Engine() = %q", f.Engine())
	}
	k, err := f.Kubernetes()
	if err != nil {
		t.Fatal(err)
	}
	if k.RunID != m.RunID || k.Settings.Namespace != "agents" || k.Settings.RuntimeClass != "gvisor" || len(k.Nodes) != len(m.Nodes) {
		t.Fatalf("kubernetes object = %+v", k)
	}
	// The settings render the same manifests again.
	again, diags := k8srender.Render(p, k8srender.Options{Engine: k.Settings.Engine(), RunID: k.RunID})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	a, _ := m.YAML()
	b, _ := again.YAML()
	if string(a) != string(b) {
		t.Error("the saved settings render different manifests")
	}
	if err := f.CheckIntegrity(); err != nil {
		t.Fatal(err)
	}

	// An edited namespace breaks the nodes digest.
	path := filepath.Join(dir, "k8s.plan")
	plain := strings.Replace(string(readPlain(t, path)), `"namespace": "agents"`, `"namespace": "prod"`, 1)
	if plain == string(readPlain(t, path)) {
		t.Fatal("the saved plan holds no namespace to edit")
	}
	if err := os.WriteFile(path, []byte(plain), 0o600); err != nil {
		t.Fatal(err)
	}
	edited, err := planfile.ReadSaved(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := edited.CheckIntegrity(); !errors.Is(err, planfile.ErrMismatch) {
		t.Fatalf("CheckIntegrity of an edited namespace = %v, want ErrMismatch", err)
	}

	d := save("docker.plan", "")
	if d.Engine() != config.EngineDocker {
		t.Fatalf("a plan without engine: Engine() = %q, want docker", d.Engine())
	}
	if k, err := d.Kubernetes(); k != nil || err != nil {
		t.Fatalf("Kubernetes() of a docker plan = %v, %v", k, err)
	}
}
