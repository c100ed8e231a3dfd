package main

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/k8srender"
	"github.com/kewplan/kewplan/planfile"
	"github.com/kewplan/kewplan/planner"
	"github.com/kewplan/kewplan/policyrules"
	"github.com/kewplan/kewplan/views"
)

// PlanCmd is `kewplan plan [PATH] [--out FILE] [--json | --format F] [--var …] [--var-file …] [--target NODE]…`.
type PlanCmd struct {
	Path     string   `arg:"" optional:"" default:"." help:"A .hcl file, or a directory whose *.hcl files (not recursive) form the configuration."`
	Out      string   `name:"out" placeholder:"FILE" help:"Also save the plan to FILE, for kewplan apply FILE and kewplan show FILE."`
	JSON     bool     `name:"json" help:"Print the plan as JSON (the same as --format json)."`
	Format   string   `name:"format" default:"human" placeholder:"FORMAT" help:"Output format: human, json, markdown (a pull-request comment), sarif (GitHub code scanning), or yaml (the Kubernetes manifests; --engine kubernetes)."`
	Engine   string   `name:"engine" placeholder:"ENGINE" help:"The engine the plan runs on: docker or kubernetes (default: the configuration's only engine block, else docker)."`
	Targets  []string `name:"target" sep:"none" placeholder:"NODE" help:"Plan only NODE, or one instance such as 'fix[\"web\"]', and everything it depends on (repeatable)."`
	Policy   string   `name:"policy" placeholder:"FILE" help:"Also enforce the organisation policy block in FILE (kept outside the repository under review)."`
	Base     string   `name:"base" placeholder:"BASEPLAN" help:"The plan this one changes (a saved plan or plan --json output): the policy's rules see the change against it as change (null without it)."`
	VarFlags `embed:""`
}

// Help shows an example.
func (PlanCmd) Help() string {
	return "Example:\n  kewplan plan examples/review-pipeline.hcl --out review.plan\n  kewplan plan --format markdown > plan.md\n" +
		"  kewplan plan --engine kubernetes examples/kubernetes.hcl\n  kewplan plan --engine kubernetes --format yaml examples/kubernetes.hcl\n\n" +
		"Exit status 0 when every node can run (warnings allowed), 1 when any node is refused."
}

// Run plans the configuration and renders the plan; nodes with errors get no argv.
func (c *PlanCmd) Run(env *Env) error {
	paths := &sarifPaths{}
	view, err := views.NewPlan(planFormat(c.Format, c.JSON), env.streams(), views.SARIFOptions{URI: paths.uri})
	if err != nil {
		return err
	}
	if c.Out != "" {
		if err := checkOutPath(c.Out); err != nil {
			return err
		}
	}
	pl, ok := planFromFlags(env, view, c.Path, c.VarFlags, c.Targets, c.Policy)
	if !ok {
		return ExitCode(1)
	}
	p, files := pl.plan, pl.files
	engine, m := planEngine(pl, c.Engine, c.Format == views.PlanFormatYAML)
	var kube *config.KubernetesEngine
	if e := pl.cfg.Engine(config.EngineKubernetes); e != nil {
		kube = e.Kubernetes
	}
	rules := policyrules.Rules(pl.cfg.Policy, pl.policy)
	dir, cfgFiles := pl.cfg.Dir, pl.cfg.Files
	// The parse tree is not needed past planning: let it go before the document is built and written, which
	// lowers a large plan's peak memory.
	pl.cfg = nil
	paths.dir = dir
	paths.isConfig = func(name string) bool { _, ok := cfgFiles[name]; return ok }
	doc := jsonplan.NewDocument(p, version, files...)
	doc.ConfigDir = relConfigDir(dir)
	doc.SetEngine(engine, m, kube)
	if _, err := judgePlan(env, rules, doc, p, c.Base, files); err != nil {
		return err
	}
	if c.Format == views.PlanFormatYAML {
		view.Diagnostics(p.Diagnostics, files...)
		if m != nil && !p.HasErrors() {
			data, err := m.YAML()
			if err != nil {
				return err
			}
			if err := view.Manifests(data); err != nil {
				return err
			}
		}
	} else if err := view.Plan(doc); err != nil {
		return err
	}
	if c.Out != "" {
		if p.HasErrors() {
			view.NotSaved(c.Out)
		} else {
			origin := planfile.Origin{Config: c.Path, Targets: c.Targets, Policy: c.Policy, PolicySrc: pl.policySrc}
			if err := planfile.Write(c.Out, doc, p, origin); err != nil {
				return fmt.Errorf("cannot save the plan to %q: %w", c.Out, err)
			}
			view.Saved(c.Out)
		}
	}
	if p.HasErrors() {
		return ExitCode(1)
	}
	return nil
}

// planEngine selects the plan's engine (--engine, else the configuration's only engine block, else docker) and,
// on kubernetes, renders the manifests with the default run id, the one `kewplan render` uses. What goes wrong is
// added to the plan's diagnostics, so the plan fails and is not saved: an unknown or unconfigured engine, --format
// yaml without kubernetes, a node that cannot become a Job (nodes with errors are already reported).
func planEngine(pl *planned, flag string, yaml bool) (string, *k8srender.Manifests) {
	p := pl.plan
	engine, diags := pl.cfg.SelectEngine(flag)
	var m *k8srender.Manifests
	switch {
	case diags.HasErrors():
	case engine == config.EngineKubernetes:
		var d hcl.Diagnostics
		m, d = k8srender.Render(p, k8srender.Options{Engine: pl.cfg.Engine(config.EngineKubernetes).Kubernetes})
		for _, x := range d {
			if x.Summary != k8srender.SummaryNodeNotRendered {
				diags = append(diags, x)
			}
		}
	case yaml:
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "No manifests on Docker",
			Detail: "--format yaml prints the Kubernetes manifests of the plan, and the plan runs on Docker. Add --engine kubernetes (with an engine \"kubernetes\" block), or use --format human, json or markdown."})
	}
	if len(diags) > 0 {
		p.Diagnostics = append(p.Diagnostics, diags...)
		config.SortDiagnostics(p.Diagnostics)
	}
	return engine, m
}

// planned is a configuration planned from the command line: what plan, apply and the other commands that plan
// need from it.
type planned struct {
	cfg       *config.Config
	vars      map[string]cty.Value
	plan      *planner.Plan
	files     []map[string][]byte // sources for diagnostic snippets: the configuration's and the policy file's
	policySrc []byte              // the --policy file's content, for a saved plan's staleness check
	policy    *config.Policy      // the --policy file's policy; nil without one
}

// planFromFlags loads, resolves and plans, enforcing the --policy file when one is given. When the configuration
// or the policy does not load it shows the diagnostics on view and returns ok false.
func planFromFlags(env *Env, view diagnosticsView, path string, vf VarFlags, targets []string, policy string) (*planned, bool) {
	l := loadToPlan(env, path, vf)
	cfg, diags := l.cfg, l.diags
	out := &planned{cfg: cfg, vars: l.vals, files: configSources(cfg)}
	fail := func(diags hcl.Diagnostics) (*planned, bool) {
		if d, ok := l.finishLoad(nil); !ok {
			diags = d
		}
		view.Diagnostics(diags, out.files...)
		return nil, false
	}
	if diags.HasErrors() {
		return fail(diags)
	}
	in := planner.Inputs{Vars: l.vals, FS: config.DirFS(cfg.Dir), Targets: targets}
	if policy != "" {
		pol, polFiles, d := config.LoadPolicyFile(policy)
		out.files = append(out.files, polFiles)
		out.policySrc = polFiles[policy]
		if d.HasErrors() {
			return fail(append(diags, d...))
		}
		diags = append(diags, d...)
		in.Policy, out.policy = pol, pol
	}
	p, planDiags := planner.Build(cfg, in)
	var evaluated func(string) bool // nil after a failed plan: every node is checked
	if !planDiags.HasErrors() {
		evaluated = p.PlannedBlocks()
	}
	d, ok := l.finishLoad(evaluated)
	if !ok {
		view.Diagnostics(d, out.files...)
		return nil, false
	}
	// The configuration's own warnings belong to the plan too.
	p.Diagnostics = config.DedupeDiagnostics(append(append(append(hcl.Diagnostics{}, diags...), d...), planDiags...))
	config.SortDiagnostics(p.Diagnostics)
	out.plan = p
	return out, true
}

// planFormat is the plan format asked for: --format, or json with --json; show uses it too.
func planFormat(format string, asJSON bool) string {
	if asJSON {
		return "json"
	}
	return format
}
