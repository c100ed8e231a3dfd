package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/hcl/v2"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/k8srender"
	"github.com/kewplan/kewplan/views"
)

// RenderCmd is `kewplan render --engine kubernetes [-o DIR | --format yaml|summary] [PATH]`.
type RenderCmd struct {
	Path     string   `arg:"" optional:"" default:"." help:"A .hcl file, or a directory whose *.hcl files (not recursive) form the configuration."`
	Engine   string   `name:"engine" default:"kubernetes" enum:"kubernetes" help:"The engine to render for: kubernetes."`
	Out      string   `name:"out" short:"o" placeholder:"DIR" help:"Write the manifests to DIR: 00-shared.yaml and one file per node (for Argo CD or Flux)."`
	Format   string   `name:"format" default:"summary" enum:"summary,yaml" help:"Without -o: summary (per-node objects and the differences from Docker) or yaml (every manifest, one stream)."`
	RunID    string   `name:"run-id" placeholder:"ID" help:"Value of the kewplan.run label (default: plan- and the configuration digest's first 12 hex digits)."`
	Targets  []string `name:"target" sep:"none" placeholder:"NODE" help:"Render only NODE and everything it depends on (repeatable)."`
	Policy   string   `name:"policy" placeholder:"FILE" help:"Also enforce the organisation policy block in FILE."`
	VarFlags `embed:""`
}

// Help shows an example.
func (RenderCmd) Help() string {
	return "Example:\n  kewplan render --engine kubernetes -o manifests examples/kubernetes.hcl\n  kewplan render --engine kubernetes --format yaml | kubectl apply --server-side -f -\n\n" +
		"The configuration needs an engine \"kubernetes\" block. A value known only after apply (another node's commit)\n" +
		"is rendered as (known after apply), with the kewplan.dev/waits-for annotation naming the node it waits for.\n" +
		"Exit status 0 when every node was rendered, 1 otherwise."
}

// Run plans the configuration and writes its Kubernetes objects.
func (c *RenderCmd) Run(env *Env) error {
	view := views.NewRender(env.streams())
	pl, ok := planFromFlags(env, view, c.Path, c.VarFlags, c.Targets, c.Policy)
	if !ok {
		return ExitCode(1)
	}
	_, diags := pl.cfg.SelectEngine(config.EngineKubernetes)
	diags = append(pl.plan.Diagnostics, diags...)
	var m *k8srender.Manifests
	if !diags.HasErrors() {
		var d hcl.Diagnostics
		m, d = k8srender.Render(pl.plan, k8srender.Options{Engine: pl.cfg.Engine(config.EngineKubernetes).Kubernetes, RunID: c.RunID})
		diags = append(diags, d...)
	}
	view.Diagnostics(diags, pl.files...)
	if diags.HasErrors() || m == nil {
		if pl.plan.HasErrors() {
			view.PlanHasErrors()
		}
		return ExitCode(1)
	}
	switch {
	case c.Out != "":
		return writeManifests(view, c.Out, m)
	case c.Format == "yaml":
		data, err := m.YAML()
		if err != nil {
			return err
		}
		return view.YAML(data)
	}
	return view.Summary(m)
}

// writeManifests writes the files into dir, replacing files of the same name and leaving others alone.
func writeManifests(view views.Render, dir string, m *k8srender.Manifests) error {
	files, err := m.Files()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("render: %w", err)
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.Name), f.Data, 0o644); err != nil {
			return fmt.Errorf("render: %w", err)
		}
	}
	view.Written(len(files), len(m.All()), dir)
	return nil
}
