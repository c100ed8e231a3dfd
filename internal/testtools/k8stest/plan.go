package k8stest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/planner"
)

// TestEngine is the kubernetes engine block the tests use for a configuration that has none.
func TestEngine(namespace string) *config.KubernetesEngine {
	return &config.KubernetesEngine{
		Namespace: namespace, GitSecret: "kewplan-git", CredentialsSecret: "agent-keys",
		ProxySelector: config.DefaultProxySelector, ProxyNamespace: namespace, ProxyService: config.DefaultProxyService,
		ProxyPort: config.DefaultProxyPort, TTLAfterFinished: config.DefaultTTLAfterFinished,
		ScratchSize: config.DefaultScratchSize, HomeSize: config.DefaultHomeSize,
	}
}

// Plan loads and plans the configuration at path with its variables' defaults. ok is false when the configuration
// does not plan cleanly (the invalid examples); the test decides whether that is a failure.
func Plan(t testing.TB, path string) (cfg *config.Config, p *planner.Plan, ok bool) {
	t.Helper()
	cfg, diags := config.Load(path)
	if diags.HasErrors() {
		return cfg, nil, false
	}
	vals, diags := cfg.ResolveVariables(config.VariableInputs{})
	if diags.HasErrors() {
		return cfg, nil, false
	}
	p, diags = planner.Build(cfg, planner.Inputs{Vars: vals, FS: config.DirFS(cfg.Dir)})
	if diags.HasErrors() {
		return cfg, p, false
	}
	return cfg, p, true
}

// Examples returns the repository's examples/*.hcl, given the path from the test's package to the repository.
func Examples(t testing.TB, root string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "examples", "*.hcl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples under %s: %v", root, err)
	}
	return files
}

// Engine returns the configuration's kubernetes engine, or TestEngine(namespace) pointed at namespace. A
// configuration's own engine is re-pointed at namespace too, so tests never touch a namespace of the example's.
func Engine(cfg *config.Config, namespace string) *config.KubernetesEngine {
	if e := cfg.Engine(config.EngineKubernetes); e != nil && e.Kubernetes != nil {
		k := *e.Kubernetes
		k.Namespace, k.ProxyNamespace = namespace, namespace
		return &k
	}
	return TestEngine(namespace)
}

// PlanSource writes src as main.hcl of a fresh directory and plans it; a configuration that does not load or plan
// cleanly fails the test, with its diagnostics. It returns the directory too (a state directory goes beside it).
func PlanSource(t testing.TB, src string) (cfg *config.Config, p *planner.Plan, dir string) {
	t.Helper()
	dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, p, ok := Plan(t, dir)
	switch {
	case !ok && p != nil:
		t.Fatalf("the test configuration does not plan: %s\n%s", config.DiagnosticsText(p.Diagnostics), src)
	case !ok:
		_, diags := config.Load(dir)
		t.Fatalf("the test configuration does not load: %s\n%s", config.DiagnosticsText(diags), src)
	}
	return cfg, p, dir
}
