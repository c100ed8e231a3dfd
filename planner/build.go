package planner

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/internal/parallel"
	"github.com/kewplan/kewplan/runners"
)

// OriginBuiltin is the credential origin of a built-in runner's own credentials.
const OriginBuiltin = "builtin"

// UnknownValue is how human views show a value that is known only after apply.
const UnknownValue = "(known after apply)"

// credentialName is what a credential entry must be: a bare environment variable name.
var credentialName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// builder holds what every node's planning shares: the evaluation context is built once, each runner is
// resolved once, and each per-configuration warning is raised once.
type builder struct {
	cfg   *config.Config
	in    Inputs
	ctx   *hcl.EvalContext
	reads *config.ReadLog
	// runners are resolved as nodes name them, by nodes planned in parallel: mu guards the map.
	mu      sync.Mutex
	runners map[string]*resolvedRunner
	// badRunners are declared runners with a credential-by-value error, already reported once.
	badRunners map[string]bool
	// sandboxRetry is the retry policy of every node without a retry block of its own: one policy, shared.
	sandboxRetry RetryPolicy
	// forwardWarned are the causes (a runner, or the open network) of nodes falling back to forwarded credentials,
	// each with its one warning (under mu; warnForwarded).
	forwardWarned map[string]forwardWarning
	// fetchReported are the provider_fetch entries already reported (under mu): one diagnostic per entry, not
	// one per instance of its node.
	fetchReported map[string]bool
}

// resolvedRunner is a node's effective runner: a built-in, a custom runner block, or a block overriding a
// built-in's credentials or args.
type resolvedRunner struct {
	name     string
	protocol string
	creds    []string
	origins  []string
	builtin  runners.Runner // nil for a custom runner
	decl     *config.Runner // nil for a built-in without a block
	// hosts are its endpoints (endpoints()), parsed once for every node on it.
	hosts []config.HostPattern
	// brokering is whether its nodes can have brokered credentials (planCredentials).
	brokering brokering
}

// args is the container command for a routed model, with diagnostics from evaluating a runner block's args.
func (r *resolvedRunner) args(ctx *hcl.EvalContext, model string) ([]string, hcl.Diagnostics) {
	if r.decl != nil && r.decl.Args != nil {
		return config.EvalRunnerArgs(r.decl, ctx, model)
	}
	if r.builtin != nil {
		return r.builtin.ContainerArgs(model), nil
	}
	return nil, nil
}

func newBuilder(cfg *config.Config, in Inputs) *builder {
	return &builder{
		cfg:          cfg,
		in:           in,
		reads:        &config.ReadLog{Files: map[string]string{}},
		runners:      map[string]*resolvedRunner{},
		badRunners:   map[string]bool{},
		sandboxRetry: effectiveRetry(cfg.Sandbox.Retry, nil),
	}
}

func (b *builder) build(p *Plan) {
	var diags hcl.Diagnostics
	ctx, ctxDiags := b.cfg.EvalContext(&config.Scope{Vars: b.in.Vars, Outputs: b.in.Outputs, FS: b.in.FS, Reads: b.reads})
	diags = append(diags, ctxDiags...)
	if ctx == nil {
		ctx = &hcl.EvalContext{}
	}
	b.ctx = ctx

	g, gDiags := newGraph(b.cfg)
	diags = append(diags, gDiags...)
	targets, tDiags := parseTargets(b.in.Targets)
	diags = append(diags, tDiags...)
	blockSel := make([]bool, len(g.names))
	if len(b.in.Targets) > 0 {
		names := make([]string, len(targets))
		for k, t := range targets {
			names[k] = t.name
		}
		var cDiags hcl.Diagnostics
		blockSel, cDiags = g.closure(names)
		diags = append(diags, cDiags...)
	} else {
		for i := range blockSel {
			blockSel[i] = true
		}
	}
	blockOrder, cyclic, oDiags := g.order(blockSel)
	diags = append(diags, oDiags...)
	diags = append(diags, b.checkRunnerBlocks()...)

	x, xDiags := b.expand(g, blockOrder, blockSel, cyclic)
	diags = append(diags, xDiags...)
	diags = append(diags, b.link(g, x)...)
	sel := make([]bool, len(x.insts))
	if len(b.in.Targets) > 0 {
		var sDiags hcl.Diagnostics
		sel, sDiags = x.selectTargets(g, targets)
		diags = append(diags, sDiags...)
	} else {
		for a := range sel {
			sel[a] = true
		}
	}

	// Every instance is evaluated by now, so each is planned on its own, in parallel; nodes and their
	// diagnostics keep the plan's order.
	order := x.order(sel)
	p.Nodes = make([]*NodePlan, len(order))
	nodeDiags := make([]hcl.Diagnostics, len(order))
	parallel.For(len(order), func(k int) {
		in := x.insts[order[k]]
		np, nDiags := b.planNode(g, x, in)
		if cyclic[in.block] || g.missing[in.block] || x.failed[in.block] {
			np.Errors = true
			np.Container = nil
		}
		p.Nodes[k], nodeDiags[k] = np, nDiags
	})
	b.forwardWarnings(p.Nodes, nodeDiags)
	for _, d := range nodeDiags {
		diags = append(diags, d...)
	}
	diags = append(diags, checkSlugs(p.Nodes)...)
	diags = append(diags, checkSharedBranches(b.cfg, p.Nodes)...)
	diags = append(diags, b.warnings(p)...)
	p.Exposure = exposure(p.Nodes)
	for _, pol := range []*config.Policy{b.cfg.Policy, b.in.Policy} {
		p.RefuseUnmaskableCredentials = p.RefuseUnmaskableCredentials || (pol != nil && pol.RefuseUnmaskableCredentials)
	}

	p.DigestInputs.Files = ConfigFileDigests(b.cfg.Dir, b.cfg.Files)
	for name, sum := range b.reads.Files {
		p.DigestInputs.Files = append(p.DigestInputs.Files, FileDigest{Name: name, Kind: FileRead, SHA256: sum})
	}
	SortFileDigests(p.DigestInputs.Files)
	vars, err := EncodeVariables(b.in.Vars)
	if err != nil {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Variable value cannot be recorded",
			Detail: fmt.Sprintf("The plan's digest covers every variable value, and this one cannot be encoded: %v.", err)})
	}
	p.DigestInputs.Variables = vars
	p.ConfigDigest = p.DigestInputs.Digest()
	p.Diagnostics = config.DedupeDiagnostics(diags)
}

// checkRunnerBlocks reports credential entries that are not bare names, once per runner block.
func (b *builder) checkRunnerBlocks() hcl.Diagnostics {
	names := make([]string, 0, len(b.cfg.Runners))
	for name := range b.cfg.Runners {
		names = append(names, name)
	}
	sort.Strings(names)
	var diags hcl.Diagnostics
	for _, name := range names {
		r := b.cfg.Runners[name]
		for i, c := range r.Credentials {
			if credentialName.MatchString(c) {
				continue
			}
			subject := r.CredentialsRange
			if i < len(r.CredentialRanges) {
				subject = r.CredentialRanges[i]
			}
			diags = append(diags, NewDiagnostic(RuleCredentialByValue, rangePtr(subject),
				fmt.Sprintf("In the credentials of runner %q, %s: a credential is the bare name of an environment variable, forwarded as -e NAME.", name, describeCredential(i, c))))
			b.badRunners[name] = true
		}
	}
	return diags
}

// describeCredential says what is wrong with a credential entry without echoing it: an entry that is not a
// name may well be the secret itself, pasted in the wrong place. Only a valid name before "=" is shown.
func describeCredential(i int, c string) string {
	entry := fmt.Sprintf("entry %d", i+1)
	name, _, hasValue := strings.Cut(c, "=")
	switch {
	case strings.TrimSpace(c) == "":
		return entry + " is empty"
	case hasValue && credentialName.MatchString(name):
		return fmt.Sprintf("%s is %q followed by \"=\" and a value (not shown)", entry, name)
	case hasValue:
		return entry + " holds \"=\" and a value (not shown)"
	case strings.HasPrefix(c, "-"):
		return entry + " starts with \"-\", so docker would read it as a flag (the entry is not shown)"
	case strings.ContainsAny(c, " \t\r\n"):
		return entry + " holds white space (the entry is not shown)"
	default:
		return entry + " holds characters other than letters, digits and \"_\", or starts with a digit (the entry is not shown, in case it is a secret)"
	}
}

// validCredentials keeps the entries that are bare names, with their origins: an invalid entry is reported at its
// runner block and must not travel on into plans, views or saved files, where it could expose a secret.
func validCredentials(creds, origins []string) ([]string, []string) {
	for _, c := range creds {
		if !credentialName.MatchString(c) {
			var keptC, keptO []string
			for i, c := range creds {
				if credentialName.MatchString(c) {
					keptC, keptO = append(keptC, c), append(keptO, origins[i])
				}
			}
			return keptC, keptO
		}
	}
	return creds, origins
}

// resolveRunner finds the effective runner of a name, once per name; nil when it is neither built in nor declared.
func (b *builder) resolveRunner(name string) *resolvedRunner {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r, ok := b.runners[name]; ok {
		return r
	}
	builtin, isBuiltin := runners.Builtin(name)
	decl := b.cfg.Runners[name]
	var r *resolvedRunner
	switch {
	case isBuiltin:
		r = &resolvedRunner{name: name, protocol: builtin.Protocol(), builtin: builtin, decl: decl}
		r.creds = builtin.RequiredCredentials()
		r.origins = repeat(OriginBuiltin, len(r.creds))
		if decl != nil && decl.Credentials != nil {
			r.creds, r.origins = declaredCredentials(decl, r.creds)
		}
	case decl != nil:
		r = &resolvedRunner{name: name, protocol: decl.Protocol, decl: decl}
		r.creds, r.origins = declaredCredentials(decl, nil)
	}
	if r != nil {
		r.creds, r.origins = validCredentials(r.creds, r.origins)
		r.hosts = r.parseEndpoints()
		r.brokering = b.newBrokering(r)
	}
	b.runners[name] = r
	return r
}

// declaredCredentials are a runner block's credentials with their origins: a name the overridden built-in declares
// itself keeps OriginBuiltin, and every other name is a widening whose origin is the entry's "file:line".
func declaredCredentials(decl *config.Runner, builtin []string) ([]string, []string) {
	creds := append([]string(nil), decl.Credentials...)
	origins := make([]string, len(creds))
	for i := range creds {
		if contains(builtin, creds[i]) {
			origins[i] = OriginBuiltin
			continue
		}
		rng := decl.CredentialsRange
		if i < len(decl.CredentialRanges) {
			rng = decl.CredentialRanges[i]
		}
		if rng.Filename == "" {
			rng = decl.DeclRange
		}
		origins[i] = fmt.Sprintf("%s:%d", rng.Filename, rng.Start.Line)
	}
	return creds, origins
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// nodeEval is one node's planning in progress: its diagnostics and the attributes known only after apply.
type nodeEval struct {
	np      *NodePlan
	diags   hcl.Diagnostics
	unknown []string
	written string // the prompt as written, trimmed, without the reviewer paragraph
	refused bool   // an error reported elsewhere (at its runner block) refuses the node
}

// attrState says what evaluating an attribute found.
func (e *nodeEval) attrState(attr string, expr hcl.Expression) evalState {
	switch {
	case expr == nil:
		return evalAbsent
	case contains(e.unknown, attr):
		return evalUnknown
	case erroredAt(e.diags, expr.Range()):
		return evalInvalid
	}
	return evalKnown
}

// evalState is what evaluating an attribute found.
type evalState int

const (
	evalAbsent  evalState = iota // not written
	evalKnown                    // a known string
	evalUnknown                  // known only after apply
	evalInvalid                  // an error was reported
)

// erroredAt reports whether an error diagnostic points inside rng.
func erroredAt(diags hcl.Diagnostics, rng hcl.Range) bool {
	for _, d := range diags {
		if d.Severity == hcl.DiagError && d.Subject != nil && d.Subject.Filename == rng.Filename &&
			d.Subject.Start.Byte >= rng.Start.Byte && d.Subject.End.Byte <= rng.End.Byte {
			return true
		}
	}
	return false
}

func (b *builder) planNode(g *graph, x *expansion, in *instance) (*NodePlan, hcl.Diagnostics) {
	n := g.nodes[in.block]
	sb := b.cfg.Sandbox
	np := &NodePlan{Name: in.inst.Address, Block: n.Name, Key: in.inst.Key, Slug: in.inst.Slug, DeclRange: n.DeclRange,
		Network: sb.Network, PidsLimit: sb.PidsLimit, Memory: sb.Memory, CPUs: sb.CPUs, TmpfsSize: sb.TmpfsSize,
		Retry: b.sandboxRetry}
	if n.Retry != nil {
		np.Retry = effectiveRetry(sb.Retry, n.Retry)
	}
	for _, d := range in.deps {
		np.DependsOn = append(np.DependsOn, x.insts[d].inst.Address)
	}
	if in.nv == nil {
		// for_each or count failed, or the node sits on a cycle: reported already.
		np.Errors = true
		return np, in.diags
	}
	// config checks each attribute's type and value (role, timeout, ref names, the repository address).
	nv, diags := in.nv, in.diags
	e := &nodeEval{np: np, diags: diags, unknown: nv.Unknown}
	np.Runner, np.Role, np.Model, np.Repo, np.Ref, np.Branch, np.Timeout =
		nv.Runner, nv.Role, nv.Model, nv.Repo, nv.Ref, nv.Branch, nv.Timeout
	if nv.PullRequest != nil {
		np.PullRequest = &PullRequestPlan{Base: nv.PullRequest.Base, Title: nv.PullRequest.Title}
	}
	b.planPrompt(e, n, nv.Prompt)
	b.planRuntime(e, n, nv)

	var r *resolvedRunner
	switch e.attrState("runner", n.Runner) {
	case evalKnown:
		r = b.planRunner(e, n, nv.Runner)
	case evalAbsent:
		e.diags = append(e.diags, NewDiagnostic(RuleUnknownRunner, rangePtr(n.DeclRange),
			fmt.Sprintf("Node %q names no runner.", n.Name)))
	case evalUnknown:
		e.diags = append(e.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Runner not known at plan time",
			Subject: rangePtr(n.Runner.Range()),
			Detail:  fmt.Sprintf("The runner of node %q depends on a value known only after apply, so its credentials and image cannot be reviewed before it runs. Name the runner directly.", n.Name)})
	}

	// The routed model must reach the container (config leaves a missing model to this rule).
	modelState := e.attrState("model", n.Model)
	switch {
	case modelState == evalAbsent:
		e.diags = append(e.diags, NewDiagnostic(RuleModelNotRouted, rangePtr(n.DeclRange),
			fmt.Sprintf("Node %q has no model attribute, so nothing says which model its agent runs.", n.Name)))
	case modelState == evalKnown && strings.TrimSpace(nv.Model) == "":
		e.diags = append(e.diags, NewDiagnostic(RuleModelNotRouted, rangePtr(n.Model.Range()),
			fmt.Sprintf("Node %q has an empty model, so nothing says which model its agent runs.", n.Name)))
		modelState = evalInvalid
	}

	b.planEgress(np, n, r)
	b.planCredentials(e, n, nv, r)
	b.planProviderFetch(e, n)

	var args []string
	argsKnown := false
	if r != nil && modelState == evalKnown {
		args, argsKnown = b.planArgs(e, n, r, nv.Model)
	}
	if r != nil && modelState == evalUnknown {
		e.unknown = append(e.unknown, "argv")
	}

	np.Unknown = e.unknown
	b.planPush(np, n)
	np.Errors = e.diags.HasErrors() || e.refused
	if !np.Errors && r != nil && argsKnown {
		np.Container = b.container(np, args)
	}
	return np, e.diags
}

// planPrompt checks the prompt, appends the reviewer paragraph, and digests it.
func (b *builder) planPrompt(e *nodeEval, n *config.Node, text string) {
	np := e.np
	switch e.attrState("prompt", n.Prompt) {
	case evalAbsent:
		e.diags = append(e.diags, NewDiagnostic(RuleEmptyPrompt, rangePtr(n.DeclRange),
			fmt.Sprintf("Node %q has no prompt attribute.", n.Name)))
		return
	case evalUnknown, evalInvalid:
		return
	}
	if strings.TrimSpace(text) == "" {
		e.diags = append(e.diags, NewDiagnostic(RuleEmptyPrompt, rangePtr(n.Prompt.Range()),
			fmt.Sprintf("The prompt of node %q is empty or only whitespace.", n.Name)))
		return
	}
	e.written = strings.TrimSpace(text)
	if contains(e.unknown, "role") {
		// Whether kewplan appends the reviewer paragraph is not known yet, so neither is the prompt's digest.
		e.unknown = append(e.unknown, "prompt")
		return
	}
	if np.Role == config.RoleReviewer {
		text = strings.TrimRight(text, "\n") + "\n\n" + ReviewerParagraph
	}
	np.Prompt = Prompt{Text: text, SHA256: SHA256Hex([]byte(text)), Bytes: len(text)}
}

// planRunner resolves the node's runner, its image and credentials, reporting every rule that refuses them.
func (b *builder) planRunner(e *nodeEval, n *config.Node, name string) *resolvedRunner {
	np := e.np
	runnerRange := rangePtr(n.Runner.Range())
	r := b.resolveRunner(name)
	if r == nil {
		known := append(runners.BuiltinNames(), slices.Sorted(maps.Keys(b.cfg.Runners))...)
		detail := fmt.Sprintf("Node %q names the runner %q, which is neither built in nor declared.", n.Name, name)
		if s := suggest(name, known); s != "" {
			detail += fmt.Sprintf(" Did you mean %q?", s)
		}
		e.diags = append(e.diags, NewDiagnostic(RuleUnknownRunner, runnerRange, detail))
		return nil
	}
	np.Protocol = r.protocol
	np.Credentials = r.creds
	np.CredentialOrigins = r.origins

	sb := b.cfg.Sandbox
	switch {
	case sb.Images[name] != "":
		np.Image = sb.Images[name]
	case name == "claude-code" && sb.Image != "":
		np.Image = sb.Image
	default:
		detail := fmt.Sprintf("Node %q runs on %q, and the sandbox maps no image to that runner.", n.Name, name)
		if sb.Image != "" {
			detail += fmt.Sprintf(" The legacy single image %q serves claude-code only; routing %q into it hands the claude CLI another agent's flags.", sb.Image, name)
		}
		e.diags = append(e.diags, NewDiagnostic(RuleUnmappedRunner, runnerRange, detail))
	}

	if len(r.creds) == 0 && !b.badRunners[name] {
		subject := runnerRange
		what := fmt.Sprintf("The runner %q declares no in-container credential", name)
		if r.decl != nil && r.decl.Credentials != nil {
			subject = rangePtr(r.decl.CredentialsRange)
		} else if r.decl != nil {
			what = fmt.Sprintf("The runner block %q declares no credentials", name)
			subject = rangePtr(r.decl.DeclRange)
		}
		e.diags = append(e.diags, NewDiagnostic(RuleCredentiallessRunner, subject,
			fmt.Sprintf("%s, so the agent of node %q could not authenticate inside the container.", what, n.Name)))
	}
	if b.badRunners[name] {
		// Reported once, at the runner block; the node is refused with it.
		e.refused = true
	}
	return r
}

// Host-owned arguments: the prompt travels in /work/.kew-prompt.txt, and a session belongs to the host.
var hostOwnedFlags = map[string]string{
	"-p": "the print/prompt mode belongs to the image's entrypoint", "--print": "the print/prompt mode belongs to the image's entrypoint",
	"--prompt": "the prompt travels in /work/.kew-prompt.txt, never in argv", "--prompt-file": "the prompt travels in /work/.kew-prompt.txt, never in argv",
	"-q": "the prompt travels in /work/.kew-prompt.txt, never in argv", "--query": "the prompt travels in /work/.kew-prompt.txt, never in argv",
	"--query-file": "the prompt travels in /work/.kew-prompt.txt, never in argv",
	"--resume":     "a session to resume lives on the host, not in the container", "-r": "a session to resume lives on the host, not in the container",
	"--continue": "a session to continue lives on the host, not in the container", "-c": "a session to continue lives on the host, not in the container",
	"--session-id": "a session id is host state and means nothing inside the container", "--session": "a session id is host state and means nothing inside the container",
}

// hostOwned says why arg is host-owned, or "" when it may reach the container.
func hostOwned(arg, prompt string) string {
	flag, value, hasValue := strings.Cut(arg, "=")
	if why, ok := hostOwnedFlags[flag]; ok && strings.HasPrefix(flag, "-") {
		return why
	}
	if prompt != "" && (arg == prompt || len(arg) >= 64 && strings.Contains(prompt, arg)) {
		return "it repeats the prompt, which travels in /work/.kew-prompt.txt, never in argv"
	}
	path := arg
	if hasValue && strings.HasPrefix(flag, "-") {
		path = value
	}
	if strings.HasPrefix(path, "/") {
		clean := "/" + strings.TrimLeft(path, "/")
		if clean != WorkDir && !strings.HasPrefix(clean, WorkDir+"/") {
			return "it is an absolute path outside /work, the container's only host mount"
		}
		if strings.Contains(clean, "/..") {
			return "it is a path that climbs out of /work"
		}
	}
	return ""
}

// planArgs evaluates the container args and checks them. argsKnown is false when they cannot be rendered.
func (b *builder) planArgs(e *nodeEval, n *config.Node, r *resolvedRunner, model string) (args []string, argsKnown bool) {
	args, diags := r.args(b.ctx, model)
	e.diags = append(e.diags, diags...)
	if diags.HasErrors() {
		return nil, false
	}
	argsRange := rangePtr(n.Runner.Range())
	var elems []hclsyntax.Expression
	if r.decl != nil && r.decl.Args != nil {
		argsRange = rangePtr(r.decl.Args.Range())
		if tuple, ok := r.decl.Args.(*hclsyntax.TupleConsExpr); ok && len(tuple.Exprs) == len(args) {
			elems = tuple.Exprs
		}
	}
	prompt := e.written
	for k, a := range args {
		why := hostOwned(a, prompt)
		if why == "" {
			continue
		}
		subject := argsRange
		if elems != nil {
			subject = rangePtr(elems[k].Range())
		}
		e.diags = append(e.diags, NewDiagnostic(RuleHostOwnedArg, subject,
			fmt.Sprintf("The args of runner %q for node %q include %q: %s.", r.name, n.Name, shorten(a), why)))
	}
	if !carriesModel(args, model) {
		subject := rangePtr(n.Model.Range())
		if r.decl != nil && r.decl.Args != nil {
			subject = argsRange
		}
		e.diags = append(e.diags, NewDiagnostic(RuleModelNotRouted, subject,
			fmt.Sprintf("Node %q routes the model %q, but the container args of runner %q do not carry it (%s).",
				n.Name, model, r.name, describeArgs(args))))
	}
	return args, true
}

// carriesModel is true when an argument is the model, a flag=model, or a provider-qualified provider/model.
func carriesModel(args []string, model string) bool {
	for _, a := range args {
		if a == model || strings.HasSuffix(a, "="+model) || strings.HasSuffix(a, "/"+model) {
			return true
		}
	}
	return false
}

func describeArgs(args []string) string {
	if len(args) == 0 {
		return "there are none"
	}
	return "they are " + ShellJoin(args)
}

// shorten keeps a diagnostic readable when an argument is long (a pasted prompt).
func shorten(s string) string {
	if len(s) <= 60 {
		return s
	}
	return s[:57] + "..."
}

// container renders the node's Container with the apply-time placeholders.
func (b *builder) container(np *NodePlan, args []string) *Container {
	sb := b.cfg.Sandbox
	network := sb.AllowlistNetwork
	var dns []string
	if sb.Network == config.NetworkOpen {
		network = OpenNetwork
	} else {
		dns = []string{ClosedDNS}
	}
	return &Container{
		Name:      ContainerPrefix + np.Slug,
		Node:      np.Name,
		RunID:     RunPlaceholder,
		Checkout:  CheckoutPlaceholder,
		Image:     np.Image,
		Network:   network,
		Runtime:   np.Runtime,
		PidsLimit: sb.PidsLimit,
		Memory:    sb.Memory,
		CPUs:      sb.CPUs,
		TmpfsSize: sb.TmpfsSize,
		DNS:       dns,
		Proxied:   sb.Network != config.NetworkOpen && len(np.Egress) > 0,
		Env:       append([]string(nil), np.Credentials...),
		BaseURL:   np.BaseURLVar,
		Args:      append([]string(nil), args...),
	}
}

// warnings raises each configuration-wide warning once, about the nodes planned.
func (b *builder) warnings(p *Plan) hcl.Diagnostics {
	var diags hcl.Diagnostics
	sb := b.cfg.Sandbox
	if len(p.Nodes) == 0 {
		return nil
	}
	if sb.Network == config.NetworkOpen {
		var nodes []string
		creds := map[string]bool{}
		for _, np := range p.Nodes {
			if len(np.Credentials) > 0 {
				nodes = append(nodes, np.Name)
				for _, c := range np.Credentials {
					creds[c] = true
				}
			}
		}
		if len(nodes) > 0 {
			diags = append(diags, NewDiagnostic(RuleOpenNetworkCredentials, rangePtr(sb.NetworkRange),
				fmt.Sprintf("network = \"open\" gives full egress to %s, which %s %s.", countNodes(nodes),
					pick(len(nodes) == 1, "holds", "hold"), strings.Join(slices.Sorted(maps.Keys(creds)), ", "))))
		}
	}
	// One warning per image reference that is not pinned, at the place it is written.
	type imageUse struct {
		ref   string
		rng   hcl.Range
		nodes []string
	}
	var uses []*imageUse
	seen := map[string]*imageUse{}
	for _, np := range p.Nodes {
		if np.Image == "" || strings.Contains(np.Image, "@sha256:") {
			continue
		}
		rng, ok := sb.ImageRanges[np.Runner]
		if !ok || sb.Images[np.Runner] != np.Image {
			rng = sb.ImageRange
		}
		key := fmt.Sprintf("%s\x00%s:%d:%d", np.Image, rng.Filename, rng.Start.Line, rng.Start.Column)
		u := seen[key]
		if u == nil {
			u = &imageUse{ref: np.Image, rng: rng}
			seen[key] = u
			uses = append(uses, u)
		}
		u.nodes = append(u.nodes, np.Name)
	}
	for _, u := range uses {
		diags = append(diags, NewDiagnostic(RuleImageNotPinned, rangePtr(u.rng),
			fmt.Sprintf("The image %q (used by %s) has no @sha256: digest.", u.ref, countNodes(u.nodes))))
	}
	if sb.Memory == "" {
		subject := sb.DeclRange
		diags = append(diags, NewDiagnostic(RuleNoMemoryLimit, rangePtr(subject),
			fmt.Sprintf("The sandbox sets no memory limit for the containers of %s.", countNodes(nodeNames(p.Nodes)))))
	}
	return diags
}

// countNodes names up to three nodes and counts the rest.
func countNodes(nodes []string) string {
	switch {
	case len(nodes) == 1:
		return fmt.Sprintf("node %q", nodes[0])
	case len(nodes) <= 3:
		q := make([]string, len(nodes))
		for i, n := range nodes {
			q[i] = fmt.Sprintf("%q", n)
		}
		return "nodes " + strings.Join(q, ", ")
	default:
		return fmt.Sprintf("%d nodes (%q, %q and %d more)", len(nodes), nodes[0], nodes[1], len(nodes)-2)
	}
}

func nodeNames(nodes []*NodePlan) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Name
	}
	return out
}

func pick(cond bool, a, b string) string {
	if cond {
		return a
	}
	return b
}

// exposure maps each credential to the nodes it reaches, sorted by node name.
func exposure(nodes []*NodePlan) map[string][]string {
	out := map[string][]string{}
	for _, np := range nodes {
		for _, c := range np.Credentials {
			out[c] = append(out[c], np.Name)
		}
	}
	for _, ns := range out {
		sort.Strings(ns)
	}
	return out
}

// nonNil is a copy of s, empty rather than nil.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return append([]string{}, s...)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
