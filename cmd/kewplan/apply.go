package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/docker/go-units"
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/executor"
	"github.com/kewplan/kewplan/executor/adapter"
	"github.com/kewplan/kewplan/executor/kubernetes"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/internal/safefile"
	"github.com/kewplan/kewplan/internal/termsafe"
	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/k8sengine"
	"github.com/kewplan/kewplan/k8srender"
	"github.com/kewplan/kewplan/planfile"
	"github.com/kewplan/kewplan/planner"
	"github.com/kewplan/kewplan/policyrules"
	"github.com/kewplan/kewplan/views"
)

// ApplyCmd is `kewplan apply [PATH|PLANFILE] [--auto-approve] [--parallelism N] [--json] [--state-dir DIR] [--var …]
// [--var-file …] [--target …]`.
type ApplyCmd struct {
	Path        string   `arg:"" optional:"" default:"." help:"A configuration (.hcl file or directory), or a plan file saved with kewplan plan --out."`
	AutoApprove bool     `name:"auto-approve" help:"Apply without asking for confirmation (required without a terminal)."`
	Parallelism int      `name:"parallelism" default:"4" placeholder:"N" help:"Run at most N nodes at once."`
	JSON        bool     `name:"json" help:"Stream progress as NDJSON events on stdout."`
	StateDir    string   `name:"state-dir" placeholder:"DIR" help:"Where the run ledger, logs and checkouts live (default: .kewplan beside the configuration)."`
	Targets     []string `name:"target" sep:"none" placeholder:"NODE" help:"Apply only NODE, or one instance such as 'fix[\"web\"]', and everything it depends on (repeatable)."`
	MinFree     string   `name:"min-free" placeholder:"SIZE" help:"Free space to keep on the filesystem holding the checkouts (e.g. 10g); a node is killed when the agent's writes go below it. Default: the larger of 1 GiB and 5% of that filesystem."`
	Policy      string   `name:"policy" env:"KEWPLAN_POLICY" placeholder:"FILE" help:"Enforce the organisation policy block in FILE and its approvals; a saved plan must have been made with the same policy (policy-mismatch otherwise). Without it, no organisation policy is enforced."`
	Resume      string   `name:"resume" placeholder:"RUN|latest" help:"Resume run RUN (or the latest run): reuse the outputs of every node that succeeded there with the same inputs, and run the others."`
	Engine      string   `name:"engine" placeholder:"docker|kubernetes" help:"Run the nodes as containers on Docker or as Jobs on Kubernetes (default: the configuration's only engine block, else docker)."`
	Base        string   `name:"base" placeholder:"BASEPLAN" help:"The plan this one changes (a saved plan or plan --json output): a policy's approvals with when = \"widening\" (or \"review\") are asked for only when this plan widens exposure against it (or a review rule matched); the policy's rules see the change as change."`
	SignReceipt string   `name:"sign-receipt" placeholder:"KEYFILE" help:"Sign the run's receipt (<state-dir>/receipts/RUN.json) with this SSH key (namespace kewplan-receipt)."`
	OTel        bool     `name:"otel" help:"Export the apply as OpenTelemetry traces and metrics (on by itself when OTEL_EXPORTER_OTLP_ENDPOINT is set; without one, to the collector's default local address). See docs/observability.md."`
	VarFlags    `embed:""`
}

// Help shows an example.
func (ApplyCmd) Help() string {
	return "Example:\n  kewplan apply examples/demo --auto-approve\n  kewplan plan --out fix.plan && kewplan apply fix.plan\n\n" +
		"Exit status 0 when every node succeeded, 1 otherwise, 130 when interrupted."
}

// Run plans (or reads a saved plan), asks for approval, and applies.
func (c *ApplyCmd) Run(env *Env) error {
	minFree, err := c.checkFlags()
	if err != nil {
		return err
	}
	view := views.NewApply(views.ViewTypeOf(c.JSON), env.streams())
	defer view.Close()
	a, err := c.plan(env, view)
	if err != nil {
		return err
	}
	// Approvals are checked before anything starts; a plan with errors is refused by approve below.
	if !a.plan.HasErrors() {
		if err := c.gate(env, a); err != nil {
			return err
		}
	}
	if ok, err := c.approve(env, view, a); !ok || err != nil {
		return err
	}
	return c.apply(env, view, a, minFree)
}

// checkFlags refuses bad flags before anything is read, and returns --min-free in bytes (0: the default).
func (c *ApplyCmd) checkFlags() (int64, error) {
	if c.Parallelism < 1 {
		return 0, fmt.Errorf("--parallelism must be at least 1, not %d", c.Parallelism)
	}
	if err := checkResumeFlag(c.Resume); err != nil {
		return 0, err
	}
	if c.MinFree == "" {
		return 0, nil
	}
	n, err := units.RAMInBytes(c.MinFree)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("--min-free %q is not a size: give bytes with an optional unit, e.g. 512m or 10g", c.MinFree)
	}
	return n, nil
}

// toApply is what apply runs: the configuration, its variable values and its plan.
type toApply struct {
	cfg   *config.Config
	vars  map[string]cty.Value
	plan  *planner.Plan
	saved bool // from a plan file, approved when it was saved
	// resume is --resume: a run id, ResumeLatest, or "" for a fresh run; resumePlan is what planner.Resume
	// decided against that run's records, shown with the plan and carried out by the executor.
	resume     string
	resumePlan *planner.ResumePlan
	// engine is the engine the nodes run on (config.EngineDocker or config.EngineKubernetes); savedEngine the one
	// a saved plan was made for.
	engine, savedEngine string
	// file is the saved plan (nil for apply DIR); gate is what the approval gate decided, for the receipt.
	file *planfile.File
	gate approvalState
	// policySrc is the bytes of --policy as apply DIR planned with them.
	policySrc []byte
	// rules are the policies' rules; judged is what they found (nil without rules).
	rules  []*config.PolicyRule
	judged *policyrules.Result
}

// ResumeLatest is the --resume value naming the newest finished run.
const ResumeLatest = executor.ResumeLatest

// checkResumeFlag refuses a --resume value that cannot name a run.
func checkResumeFlag(v string) error {
	if v == "" {
		return nil
	}
	for _, r := range v {
		if r <= ' ' || r == 0x7f || r == '/' || r == '\\' {
			return fmt.Errorf("--resume %q is not a run id: give a run id from kewplan runs, or %q", termsafe.String(v), ResumeLatest)
		}
	}
	return nil
}

// plan reads the saved plan (refusing a stale or edited one) or plans the configuration, and shows it.
func (c *ApplyCmd) plan(env *Env, view views.Apply) (*toApply, error) {
	if !isSavedPlan(c.Path) {
		pl, ok := planFromFlags(env, view, c.Path, c.VarFlags, c.Targets, c.Policy)
		if !ok {
			return nil, ExitCode(1)
		}
		a := &toApply{cfg: pl.cfg, vars: pl.vars, plan: pl.plan, resume: c.Resume, policySrc: pl.policySrc,
			rules: policyrules.Rules(pl.cfg.Policy, pl.policy)}
		if !c.selectEngine(view, a, pl.files...) {
			return nil, ExitCode(1)
		}
		if err := c.decideResume(env, a); err != nil {
			return nil, err
		}
		doc := jsonplan.NewDocument(pl.plan, version, pl.files...)
		doc.Resume = jsonplan.NewResumeDocument(a.resumePlan)
		if a.engine == config.EngineKubernetes {
			// The plan shown for approval is the cluster's, as `plan --engine kubernetes` shows it (credentials
			// forwarded, each node's Job), not Docker's.
			e := pl.cfg.Engine(config.EngineKubernetes).Kubernetes
			m, _ := k8srender.Render(pl.plan, k8srender.Options{Engine: e})
			doc.SetEngine(a.engine, m, e)
		}
		res, err := judgePlan(env, a.rules, doc, pl.plan, c.Base, pl.files)
		if err != nil {
			return nil, err
		}
		a.judged = res
		return a, view.Plan(doc)
	}
	if len(c.Vars) > 0 || len(c.VarFiles) > 0 || len(c.Targets) > 0 {
		return nil, errors.New("a saved plan carries its own variables and targets: --var, --var-file and --target cannot change it; run kewplan plan again instead")
	}
	f, err := planfile.ReadSaved(c.Path)
	if err != nil {
		return nil, err
	}
	// The organisation policy is apply's input, never the plan's: given one, the plan must have been made with
	// exactly it (policy-mismatch otherwise), and the re-plan and the approvals use it.
	if c.Policy != "" {
		src, err := safefile.Read(c.Policy, config.MaxPolicyFileBytes)
		if err != nil {
			return nil, fmt.Errorf("--policy: %w", err)
		}
		if err := f.EnforcePolicy(c.Policy, src); err != nil {
			return nil, err
		}
	}
	// Reload refuses a stale plan, re-plans it (with that policy, or the one it was made with) and refuses a plan
	// file whose nodes differ from that re-plan, so what runs is exactly what was reviewed.
	cfg, p, err := f.Reload()
	if err != nil {
		return nil, err
	}
	vars, err := f.Doc.Saved.Vars()
	if err != nil {
		return nil, fmt.Errorf("saved plan variables: %w", err)
	}
	view.SavedPlan(c.Path, len(p.Nodes), p.ConfigDigest)
	a := &toApply{cfg: cfg, vars: vars, plan: p, saved: true, savedEngine: f.Engine(), resume: c.Resume, file: f}
	if err := c.judgeSaved(env, view, a); err != nil {
		return nil, err
	}
	if !c.selectEngine(view, a) {
		return nil, ExitCode(1)
	}
	return a, c.decideResume(env, a)
}

// judgeSaved judges a saved plan's document again with the rules of the configuration's policy and of the
// organisation policy apply enforces (--policy, else the one the plan was made with), against --base when given,
// and shows the findings: a deny refuses the plan, a review makes a when = "review" approvals block apply.
func (c *ApplyCmd) judgeSaved(env *Env, view views.Apply, a *toApply) error {
	files := configSources(a.cfg)
	policies := []*config.Policy{a.cfg.Policy}
	if path := c.Policy; path != "" || a.file.PolicyLocation() != "" {
		if path == "" {
			path = a.file.PolicyLocation()
		}
		pol, polFiles, diags := config.LoadPolicyFile(path)
		if diags.HasErrors() {
			return fmt.Errorf("%w: the policy file %s no longer loads", planfile.ErrStale, termsafe.String(path))
		}
		policies = append(policies, pol)
		files = append(files, polFiles)
	}
	a.rules = policyrules.Rules(policies...)
	res, err := judgePlan(env, a.rules, a.file.Doc, nil, c.Base, files)
	if err != nil || res == nil {
		return err
	}
	a.judged = res
	diags := res.Diagnostics()
	if len(diags) > 0 {
		a.plan.Diagnostics = append(a.plan.Diagnostics, diags...)
		view.Diagnostics(diags, files...)
	}
	return nil
}

// selectEngine decides the engine: --engine, else the configuration's only engine block, else docker. A saved plan
// runs on the engine it was made for: what was reviewed is what runs, so a different --engine is refused. A bad
// value or a missing engine block is a diagnostic.
func (c *ApplyCmd) selectEngine(view views.Apply, a *toApply, files ...map[string][]byte) bool {
	flag := c.Engine
	if a.saved {
		if flag != "" && flag != a.savedEngine {
			view.Diagnostics(hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Engine differs from the saved plan",
				Detail: fmt.Sprintf("The plan file was made for the engine %q, and --engine asks for %q. A saved plan runs where it was reviewed: drop --engine, or run kewplan plan --engine %s --out FILE again.",
					a.savedEngine, termsafe.String(flag), termsafe.String(flag))}})
			return false
		}
		flag = a.savedEngine
	}
	name, diags := a.cfg.SelectEngine(flag)
	if diags.HasErrors() {
		view.Diagnostics(diags, files...)
		return false
	}
	a.engine = name
	return true
}

// applyEngine is the engine the nodes run on: nil for Docker (the executor's default), or the Kubernetes engine
// connected to the cluster of the configuration's engine "kubernetes" block (kubeconfig, KUBECONFIG honoured, its
// context).
func applyEngine(a *toApply) (adapter.Engine, error) {
	if a.engine != config.EngineKubernetes {
		return nil, nil
	}
	e := a.cfg.Engine(config.EngineKubernetes).Kubernetes
	rc, err := k8sengine.RESTConfig(e)
	if err != nil {
		return nil, err
	}
	cl, err := k8sengine.New(rc, e.Namespace)
	if err != nil {
		return nil, err
	}
	return kubernetes.New(kubernetes.Options{Engine: e, Cluster: cl}), nil
}

// decideResume makes the resume decisions of --resume before approval, so the plan shows them; a plan with
// errors has none to make.
func (c *ApplyCmd) decideResume(env *Env, a *toApply) error {
	if a.resume == "" || a.plan.HasErrors() {
		return nil
	}
	// A run whose apply died is recognised (and its work kept) before it is looked for: --resume latest then
	// finds it interrupted, and its kept work is there for resume_from_salvage.
	stateDir := applyStateDir(c.StateDir, a.cfg)
	recoverState(env, stateDir)
	rp, err := planResume(stateDir, a)
	if err != nil {
		return err
	}
	a.resumePlan = rp
	return nil
}

// approve refuses a plan with errors, skips an empty one, and asks for a 'yes' unless the plan was saved (and so
// reviewed) or --auto-approve is given. ok is false when nothing is to be run.
func (c *ApplyCmd) approve(env *Env, view views.Apply, a *toApply) (ok bool, err error) {
	if a.plan.HasErrors() {
		view.PlanHasErrors()
		return false, ExitCode(1)
	}
	if len(a.plan.Nodes) == 0 {
		view.NothingToApply()
		return false, nil
	}
	if a.saved || c.AutoApprove {
		return true, nil
	}
	if !env.StdinTTY {
		return false, errors.New("no terminal to ask for approval: review the plan above and run again with --auto-approve, or save it with kewplan plan --out FILE and apply that file")
	}
	view.ApprovalPrompt(len(a.plan.Nodes))
	answer, _ := bufio.NewReader(env.Stdin).ReadString('\n')
	if strings.TrimSpace(answer) != "yes" {
		view.Cancelled()
		return false, ExitCode(1)
	}
	view.Approved()
	return true, nil
}

// apply runs the plan with the view's hooks and turns its outcome into the exit status.
func (c *ApplyCmd) apply(env *Env, view views.Apply, a *toApply, minFree int64) error {
	stateDir := applyStateDir(c.StateDir, a.cfg)
	eng, err := applyEngine(a)
	if err != nil {
		view.PreflightFailed([]string{err.Error()})
		return ExitCode(1)
	}
	hooks, closeTelemetry, err := c.telemetryHooks(env, a, view.Hooks())
	if err != nil {
		view.PreflightFailed([]string{err.Error()})
		return ExitCode(1)
	}
	defer closeTelemetry()
	ctx, stopSignals, janitor := applySignals(view)
	defer stopSignals()
	receipts := &startReceipts{a: a, stateDir: stateDir}
	sum, err := executor.Apply(ctx, executor.ApplyOptions{
		Config: a.cfg, Vars: a.vars, Plan: a.plan, StateDir: stateDir, Parallelism: c.Parallelism, MinFreeBytes: minFree,
		Environ: env.Environ, Hooks: append(hooks, receipts), KewplanVersion: version, Janitor: janitor,
		Resume: a.resumePlan, Engine: eng, RunStarting: receipts.write,
	})
	if len(receipts.warnings) > 0 {
		views.Recovery(env.streams(), &executor.Recovery{Warnings: receipts.warnings})
	}
	if err != nil {
		var pe *executor.PreflightError
		if errors.As(err, &pe) {
			view.PreflightFailed(pe.Problems)
			return ExitCode(1)
		}
		return err
	}
	if err := c.writeReceipt(env, a, stateDir, sum); err != nil {
		return err
	}
	switch sum.Status {
	case ledger.RunSucceeded:
		return nil
	case ledger.RunCancelled:
		return ExitCode(exitInterrupted)
	default:
		return ExitCode(1)
	}
}

// applySignals cancels the apply's context on the first SIGINT or SIGTERM, so it starts nothing new and kills
// and removes what runs; a second signal makes one last bounded cleanup attempt and exits 130 at once.
func applySignals(view views.Apply) (context.Context, func(), *executor.Janitor) {
	ctx, cancel := context.WithCancel(context.Background())
	janitor := executor.NewJanitor()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	stopped := make(chan struct{})
	go func() {
		select {
		case <-sigs:
		case <-stopped:
			return
		}
		view.Interrupted()
		cancel()
		select {
		case <-sigs:
		case <-stopped:
			return
		}
		view.InterruptedAgain()
		for _, err := range janitor.Now(10 * time.Second) {
			view.CleanupFailed(err)
		}
		os.Exit(exitInterrupted)
	}()
	return ctx, func() { signal.Stop(sigs); close(stopped); cancel() }, janitor
}

// isSavedPlan tells a plan file from a configuration: a regular file that is not .hcl and is gzip-compressed
// (planfile.Write) or JSON (a plan file written before compression, whose first byte is '{').
func isSavedPlan(path string) bool {
	if strings.HasSuffix(path, ".hcl") {
		return false
	}
	// One non-blocking open, then fstat: no window between a stat and an open, and a FIFO is not waited on.
	f, err := safefile.Open(path, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 512)
	n, _ := io.ReadFull(f, head)
	return bytes.HasPrefix(head[:n], []byte{0x1f, 0x8b}) || bytes.HasPrefix(bytes.TrimSpace(head[:n]), []byte("{"))
}
