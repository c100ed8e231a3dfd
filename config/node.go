package config

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// DefaultTimeout is a node's timeout when none is written.
const DefaultTimeout = 60 * time.Minute

// DefaultBranchPrefix prefixes the branch a node's commits are pushed to when none is written.
const DefaultBranchPrefix = "kew/"

var nodeSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "runner"},
		{Name: "role"},
		{Name: "model"},
		{Name: "repo"},
		{Name: "ref"},
		{Name: "branch"},
		{Name: "prompt"},
		{Name: "timeout"},
		{Name: "depends_on"},
		{Name: "runtime"},
		{Name: "for_each"},
		{Name: "count"},
		{Name: "credentials"},
		{Name: "allow_protected_push"},
		{Name: "resume_from_salvage"},
	},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "pull_request"},
		{Type: "egress"},
		{Type: "retry"},
		{Type: "budget"},
	},
}

// nodeArguments are nodeSchema's attributes in name order: a node's Attrs holds no others, so walking this
// list visits them in a fixed order without sorting the map's keys for each node.
var nodeArguments = func() []string {
	var names []string
	for _, a := range nodeSchema.Attributes {
		names = append(names, a.Name)
	}
	slices.Sort(names)
	return names
}()

var pullRequestSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "base"},
		{Name: "title"},
	},
}

// requiredNodeAttributes are checked by config. A missing `model` is deliberately left to the planner's
// model-not-routed rule, so that the finding carries its rule id.
var requiredNodeAttributes = []struct{ name, example string }{
	{"runner", `runner = "claude-code"`},
	{"repo", `repo = "https://github.com/acme/widgets.git"`},
	{"prompt", `prompt = file("prompts/task.md")`},
}

func decodeNodeBlock(block *hcl.Block) (*Node, hcl.Diagnostics) {
	name := block.Labels[0]
	if d := checkName("node", name, block.LabelRanges[0]); d != nil {
		return nil, hcl.Diagnostics{d}
	}
	n := &Node{Name: name, DeclRange: block.DefRange}
	where := fmt.Sprintf("node %q", name)
	content, diags := bodyContent(block.Body, nodeSchema, "a node block")
	n.Attrs = content.Attributes // the node's own map: nothing else keeps the content
	if n.Attrs == nil {
		n.Attrs = map[string]*hcl.Attribute{}
	}
	for _, req := range requiredNodeAttributes {
		if _, ok := content.Attributes[req.name]; !ok {
			diags = append(diags, errorDiag("Missing required argument",
				fmt.Sprintf("The %s has no %s argument, which every node needs. Add it to the block, for example %s.", where, req.name, req.example),
				block.DefRange))
		}
	}
	get := func(name string) hcl.Expression {
		if a, ok := content.Attributes[name]; ok {
			return a.Expr
		}
		return nil
	}
	n.Runner, n.Role, n.Model = get("runner"), get("role"), get("model")
	n.Repo, n.Ref, n.Branch = get("repo"), get("ref"), get("branch")
	n.Prompt, n.Timeout = get("prompt"), get("timeout")
	n.Runtime, n.Credentials = get("runtime"), get("credentials")
	n.ForEach, n.Count = get("for_each"), get("count")
	if attr, ok := content.Attributes["allow_protected_push"]; ok {
		if b, d := constBool(attr, where); !d.HasErrors() {
			n.AllowProtectedPush, n.AllowProtectedPushRange = b, attr.Range
		} else {
			diags = append(diags, d...)
		}
	}
	if attr, ok := content.Attributes["resume_from_salvage"]; ok {
		if b, d := constBool(attr, where); !d.HasErrors() {
			n.ResumeFromSalvage = &b
		} else {
			diags = append(diags, d...)
		}
	}
	if n.ForEach != nil && n.Count != nil {
		diags = append(diags, errorDiag(`Invalid combination of "count" and "for_each"`,
			`The "count" and "for_each" meta-arguments are mutually-exclusive, only one should be used to be explicit about the number of instances to be planned.`,
			content.Attributes["for_each"].NameRange))
	}

	if attr, ok := content.Attributes["depends_on"]; ok {
		refs, d := decodeDependsOn(attr)
		diags = append(diags, d...)
		n.DependsOn = refs
	}
	retry, d := decodeRetryBlocks(content.Blocks, where)
	diags = append(diags, d...)
	n.Retry = retry
	diags = append(diags, decodeBudgetBlocks(content.Blocks, where, &n.Budget)...)
	for _, b := range content.Blocks {
		if b.Type == "egress" {
			if n.Egress != nil {
				diags = append(diags, errorDiag("Duplicate egress block",
					fmt.Sprintf("The %s already has an egress block at %s. Merge the two blocks into one.", where, rangeString(n.Egress.DeclRange)),
					b.DefRange))
				continue
			}
			ne, d := decodeNodeEgress(b, name)
			diags = append(diags, d...)
			n.Egress = ne
			continue
		}
		if b.Type != "pull_request" {
			continue
		}
		if n.PullRequest != nil {
			diags = append(diags, errorDiag("Duplicate pull_request block",
				fmt.Sprintf("The %s already has a pull_request block at %s. A node opens at most one pull request; merge the two blocks.", where, rangeString(n.PullRequest.DeclRange)),
				b.DefRange))
			continue
		}
		pr, d := decodePullRequestBlock(b)
		diags = append(diags, d...)
		n.PullRequest = pr
	}
	n.vars = make(map[hcl.Expression][]hcl.Traversal, len(n.Attrs)+2)
	for _, e := range n.expressions() {
		if _, native := e.(hclsyntax.Expression); native { // a pointer, so a map key by identity
			n.vars[e] = expressionVariables(e)
		}
		n.valueDependent = n.valueDependent || valueDependent(e)
	}
	return n, diags
}

// expressions are the node's attributes' expressions and its pull_request block's: what the load-time checks
// read references from.
func (n *Node) expressions() []hcl.Expression {
	out := make([]hcl.Expression, 0, len(n.Attrs)+2)
	for _, name := range nodeArguments {
		if a := n.Attrs[name]; a != nil {
			out = append(out, a.Expr)
		}
	}
	if pr := n.PullRequest; pr != nil {
		for _, e := range []hcl.Expression{pr.Base, pr.Title} {
			if e != nil {
				out = append(out, e)
			}
		}
	}
	return out
}

// variables returns expr.Variables(), walked once at decode for the node's own expressions: the load-time checks
// ask for each expression's references three times (unresolved references, dependencies, the values they keep),
// and walking a template for them was a tenth of planning's CPU time. The result is shared: never modify it.
func (n *Node) variables(expr hcl.Expression) []hcl.Traversal {
	if v, ok := n.vars[expr]; ok {
		return v
	}
	return expr.Variables()
}

func decodePullRequestBlock(block *hcl.Block) (*PullRequest, hcl.Diagnostics) {
	content, diags := bodyContent(block.Body, pullRequestSchema, "a pull_request block")
	pr := &PullRequest{DeclRange: block.DefRange}
	if a, ok := content.Attributes["base"]; ok {
		pr.Base = a.Expr
	}
	if a, ok := content.Attributes["title"]; ok {
		pr.Title = a.Expr
	}
	return pr, diags
}

// decodeDependsOn reads `depends_on = [node.a, node.b, node.fix["api"]]`: a whole node (every instance of it), or
// one instance of a node with for_each or count.
func decodeDependsOn(attr *hcl.Attribute) ([]NodeRef, hcl.Diagnostics) {
	exprs, diags := hcl.ExprList(attr.Expr)
	if diags.HasErrors() {
		return nil, hcl.Diagnostics{errorDiag("Invalid depends_on",
			"depends_on must be a list of nodes written in brackets, for example depends_on = [node.fix].",
			attr.Expr.Range())}
	}
	refs := make([]NodeRef, 0, len(exprs))
	for _, e := range exprs {
		trav, d := hcl.AbsTraversalForExpr(e)
		ok := !d.HasErrors() && (len(trav) == 2 || len(trav) == 3) && trav.RootName() == "node"
		var name string
		var key cty.Value
		if ok {
			step, isAttr := trav[1].(hcl.TraverseAttr)
			ok, name = isAttr, step.Name
		}
		if ok && len(trav) == 3 {
			idx, isIndex := trav[2].(hcl.TraverseIndex)
			ok, key = isIndex, idx.Key
		}
		if !ok {
			hint := ""
			if !d.HasErrors() && len(trav) >= 3 && trav.RootName() == "node" {
				hint = " Name the node itself (or one of its instances, node.fix[\"api\"]), not one of its outputs."
			}
			diags = append(diags, errorDiag("Invalid depends_on entry",
				fmt.Sprintf("Each depends_on entry names another node as node.<name>, for example depends_on = [node.fix].%s", hint),
				e.Range()))
			continue
		}
		ref := NodeRef{Name: name, Range: e.Range(), Explicit: true, Whole: key == cty.NilVal}
		if key != cty.NilVal {
			ref.Keys = []cty.Value{key}
		}
		refs = append(refs, ref)
	}
	if len(refs) == 0 {
		refs = nil
	}
	return refs, diags
}

// NodeValues are a node's evaluated attributes, defaults applied. A value known only after apply is left at
// its zero value and its attribute is named in Unknown.
type NodeValues struct {
	Runner  string
	Role    string // RoleWorker or RoleReviewer
	Model   string // "" when the attribute is missing or unknown
	Repo    string
	Ref     string // "" for the remote's default branch
	Branch  string
	Prompt  string
	Timeout time.Duration
	// Runtime is the node's own container runtime; "" when the node does not choose one (the sandbox's applies).
	Runtime string
	// Credentials is the node's own credentials mode (config.CredentialsBrokered or CredentialsForward); "" when
	// the node does not choose one (the sandbox's applies).
	Credentials string
	// PullRequest is nil when the node has no pull_request block.
	PullRequest *PullRequestValues
	// Unknown names the attributes whose values are known only after apply, in schema order.
	Unknown []string
}

// PullRequestValues are a pull_request block's evaluated attributes ("" when unset or unknown).
type PullRequestValues struct {
	Base  string
	Title string
}

// EvalNode evaluates every attribute of n in ctx (see EvalContext), converting each to its type and checking
// its value: role, timeout, branch and ref names, repository URL.
//
// A node with for_each or count is evaluated per instance with EvalInstance; EvalNode evaluates it with each and
// count unknown.
func EvalNode(n *Node, ctx *hcl.EvalContext) (*NodeValues, hcl.Diagnostics) {
	return evalNode(n, ctx)
}

func evalNode(n *Node, ctx *hcl.EvalContext) (*NodeValues, hcl.Diagnostics) {
	if n.ForEach != nil || n.Count != nil {
		return evalInstance(n, unknownInstance(n), ctx)
	}
	return evalInstance(n, &Instance{Address: n.Name, Slug: n.Name}, ctx)
}

// EvalInstance evaluates one instance of n (see EvalExpansion) in ctx, with each or count bound to the instance.
// Its default branch is "kew/<slug>", and diagnostics name it by its address.
func EvalInstance(n *Node, inst *Instance, ctx *hcl.EvalContext) (*NodeValues, hcl.Diagnostics) {
	return evalInstance(n, inst, ctx)
}

// EvalInstanceRepo is EvalInstance's Repo alone ("" when it is unknown or not valid; EvalInstance reports why):
// what the nodes that depend on this one see of it at plan time besides their outputs, so the planner can walk
// the graph in dependency order with it and evaluate every instance in full afterwards, side by side.
//
// ctx is called for the context only when the repository's expression is not a literal: most are, and a quoted
// string's value is read without evaluating anything.
func EvalInstanceRepo(n *Node, inst *Instance, ctx func() *hcl.EvalContext) string {
	if s, ok := quotedString(n.Repo); ok {
		if checkRepo(s) != "" {
			return ""
		}
		return s
	}
	c := &hcl.EvalContext{} // a literal reads nothing from its context
	if n.Repo != nil && !isLiteral(n.Repo) {
		c = ctx()
	}
	nv, _ := evalInstanceOnly(n, inst, c, "repo")
	return nv.Repo
}

func evalInstance(n *Node, inst *Instance, ctx *hcl.EvalContext) (*NodeValues, hcl.Diagnostics) {
	return evalInstanceOnly(n, inst, ctx, "")
}

// evalInstanceOnly evaluates the attribute named only, or every attribute when only is "".
func evalInstanceOnly(n *Node, inst *Instance, ctx *hcl.EvalContext, only string) (*NodeValues, hcl.Diagnostics) {
	ctx = InstanceContext(ctx, n, inst)
	nv := &NodeValues{Role: RoleWorker, Branch: DefaultBranchPrefix + inst.Slug, Timeout: DefaultTimeout}
	var diags hcl.Diagnostics
	where := describeAddress(inst.Address)
	str := func(name string, expr hcl.Expression, dst *string, check func(string) string) {
		if expr == nil || (only != "" && name != only) {
			return
		}
		attr := n.Attrs[name]
		if attr == nil {
			attr = &hcl.Attribute{Name: name, Expr: expr, Range: expr.Range(), NameRange: expr.Range()}
		}
		v, d := exprValue(expr, ctx)
		diags = append(diags, d...)
		if d.HasErrors() {
			return
		}
		if !v.IsWhollyKnown() {
			if sv, err := convert.Convert(v, cty.String); err != nil {
				diags = append(diags, wrongTypeDiag(attr, where, "a string", v.Type()))
			} else if !sv.IsKnown() {
				nv.Unknown = append(nv.Unknown, name)
			}
			return
		}
		s, d := asString(v, attr, where)
		diags = append(diags, d...)
		if d.HasErrors() {
			return
		}
		if check != nil {
			if msg := check(s); msg != "" {
				if name == "branch" || name == "pull_request.base" {
					if d := badKeyInBranch(n, inst, expr, name, msg); d != nil {
						diags = append(diags, d)
						return
					}
				}
				diags = append(diags, errorDiag(fmt.Sprintf("Invalid %s", name), fmt.Sprintf("The %s of %s is not valid: %s", name, where, msg), expr.Range()))
				return
			}
		}
		*dst = s
	}
	str("runner", n.Runner, &nv.Runner, func(s string) string {
		if s == "" {
			return "it is empty. Name a built-in runner (such as \"claude-code\") or one declared in a runner block."
		}
		return ""
	})
	str("role", n.Role, &nv.Role, func(s string) string {
		if s != RoleWorker && s != RoleReviewer {
			return fmt.Sprintf("%q is not a role.%s A node is a %q (the default: it changes the repository) or a %q (it reads the repository and writes a verdict).", s, didYouMean(s, []string{RoleWorker, RoleReviewer}), RoleWorker, RoleReviewer)
		}
		return ""
	})
	str("model", n.Model, &nv.Model, nil)
	str("repo", n.Repo, &nv.Repo, checkRepo)
	str("ref", n.Ref, &nv.Ref, func(s string) string {
		if s == "" {
			return "it is empty. Remove the argument to use the remote's default branch, or name a branch, tag or commit."
		}
		return checkRefName(s)
	})
	str("branch", n.Branch, &nv.Branch, checkRefName)
	str("prompt", n.Prompt, &nv.Prompt, nil)
	var timeout string
	str("timeout", n.Timeout, &timeout, func(s string) string {
		d, err := time.ParseDuration(s)
		switch {
		case err != nil:
			return fmt.Sprintf("%q is not a duration. Write a number with a unit, such as \"45m\" or \"2h\".", s)
		case d <= 0:
			return fmt.Sprintf("%q is not a positive duration. Write a positive duration, such as \"45m\".", s)
		}
		return ""
	})
	if timeout != "" {
		nv.Timeout, _ = time.ParseDuration(timeout)
	}
	str("runtime", n.Runtime, &nv.Runtime, func(s string) string { return checkRuntimeName(s, runtimeFix) })
	str("credentials", n.Credentials, &nv.Credentials, func(s string) string {
		if msg := checkCredentialMode(s); msg != "" {
			return msg[:1] + msg[1:]
		}
		return ""
	})
	if n.PullRequest != nil {
		pr := &PullRequestValues{}
		str("pull_request.base", n.PullRequest.Base, &pr.Base, checkRefName)
		str("pull_request.title", n.PullRequest.Title, &pr.Title, nil)
		nv.PullRequest = pr
	}
	return nv, diags
}

// checkRepo refuses repository addresses that would make git run a program or read an option. git's
// "<transport>::<address>" form selects a remote helper, and ext:: runs an arbitrary command on the host.
func checkRepo(s string) string {
	switch {
	case s == "":
		return "it is empty. Give the repository's clone URL, such as \"https://github.com/acme/widgets.git\"."
	case strings.HasPrefix(s, "-"):
		return "it starts with '-', so git would read it as an option. Give the repository's clone URL, such as \"https://github.com/acme/widgets.git\"."
	case strings.Contains(s, "::"):
		return "it uses git's <transport>::<address> form, which makes git run a remote helper program (ext:: runs any command). Give an https://, ssh:// or git@host:path URL."
	case strings.ContainsAny(s, " \t\r\n"):
		return "it holds white space. Give the repository's clone URL, such as \"https://github.com/acme/widgets.git\"."
	}
	return ""
}

// checkRefName applies git's check-ref-format rules that matter here, plus a refusal of a leading '-' (which
// git would read as an option) and returns a diagnostic detail, or "".
func checkRefName(s string) string {
	bad := ""
	switch {
	case s == "":
		bad = "it is empty"
	case strings.HasPrefix(s, "-"):
		bad = "it starts with '-', so git would read it as an option"
	case strings.HasPrefix(s, "/") || strings.HasSuffix(s, "/") || strings.Contains(s, "//"):
		bad = "it has an empty path component"
	case strings.HasSuffix(s, ".") || strings.HasSuffix(s, ".lock"):
		bad = "it ends with '.' or '.lock'"
	case strings.Contains(s, "..") || strings.Contains(s, "@{") || s == "@":
		bad = "it holds '..' or '@{'"
	case strings.ContainsAny(s, " ~^:?*[\\\x7f"):
		bad = "it holds a space or one of ~ ^ : ? * [ \\"
	default:
		for _, r := range s {
			if r < 0x20 {
				bad = "it holds a control character"
				break
			}
		}
		for _, part := range strings.Split(s, "/") {
			if strings.HasPrefix(part, ".") {
				bad = "a path component starts with '.'"
			}
		}
	}
	if bad == "" {
		return ""
	}
	return fmt.Sprintf("%q is not a git reference name: %s. Use a name such as \"kew/fix\" or \"main\".", s, bad)
}
