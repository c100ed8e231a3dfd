package config

import (
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"

	"github.com/kewplan/kewplan/internal/parallel"
)

// VariableInputs are the raw variable values from outside the configuration, in Terraform's precedence order:
// environment (lowest), then --var-file files in order, then --var flags in order (highest).
type VariableInputs struct {
	Env      []string // os.Environ()-style "KEY=value"; only KEWPLAN_VAR_<name> entries are used
	VarFiles []string // paths of .hcl variable files
	Vars     []string // "name=value" from --var
}

// Scope is what expressions are evaluated against.
type Scope struct {
	Vars map[string]cty.Value
	// Outputs holds the known outputs of finished nodes (node address -> output name -> value): "fix" for a node
	// without for_each or count, `fix["api"]` or "shard[2]" for an instance. A node absent here has every output
	// unknown (cty.UnknownVal(cty.String)), which the planner shows as "(known after apply)".
	Outputs map[string]map[string]cty.Value
	// FS serves file() and templatefile(), rooted at Config.Dir. When nil, DirFS(Config.Dir) is used.
	FS fs.FS
	// Reads, when not nil, records every file read through FS (for the saved plan's config digest).
	Reads *ReadLog
}

// ReadLog records files read by file() and templatefile(): name (relative to Config.Dir) -> sha256 hex.
// It is safe for concurrent use by evaluations sharing it.
type ReadLog struct {
	Files map[string]string
	mu    sync.Mutex
}

func (l *ReadLog) record(name, sum string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.Files == nil {
		l.Files = map[string]string{}
	}
	l.Files[name] = sum
}

// EvalContext builds the evaluation context for node attributes: var.*, local.* (evaluated here, in dependency
// order), node.<name>.<output>, and the function table (file, templatefile and the go-cty stdlib set).
// A declared variable missing from s.Vars is unknown. The diagnostics are those of evaluating the locals.
func (c *Config) EvalContext(s *Scope) (*hcl.EvalContext, hcl.Diagnostics) {
	if s == nil {
		s = &Scope{}
	}
	fsys := s.FS
	if fsys == nil {
		fsys = DirFS(c.Dir)
	}
	r := &fileReader{fsys: fsys, reads: s.Reads, resolved: c.Resolved}
	return c.evalContext(s, r.functions())
}

// functions is the full function table with file() and templatefile() served by r.
func (r *fileReader) functions() map[string]function.Function {
	funcs := stdlibFunctions()
	funcs["file"] = r.fileFunc()
	inner := make(map[string]function.Function, len(funcs))
	for k, v := range funcs {
		inner[k] = v
	}
	funcs["templatefile"] = r.templateFileFunc(inner)
	return funcs
}

// staticFunctions is the function table for checks at load time: file() and templatefile() return unknown
// values without touching the file system.
func staticFunctions() map[string]function.Function {
	funcs := stdlibFunctions()
	funcs["file"] = function.New(&function.Spec{
		Params: []function.Parameter{{Name: "path", Type: cty.String}},
		Type:   function.StaticReturnType(cty.String),
		Impl: func([]cty.Value, cty.Type) (cty.Value, error) {
			return cty.UnknownVal(cty.String), nil
		},
	})
	funcs["templatefile"] = function.New(&function.Spec{
		Params: []function.Parameter{
			{Name: "path", Type: cty.String},
			{Name: "vars", Type: cty.DynamicPseudoType, AllowUnknown: true, AllowDynamicType: true},
		},
		Type: function.StaticReturnType(cty.DynamicPseudoType),
		Impl: func([]cty.Value, cty.Type) (cty.Value, error) { return cty.DynamicVal, nil },
	})
	return funcs
}

func (c *Config) evalContext(s *Scope, funcs map[string]function.Function) (*hcl.EvalContext, hcl.Diagnostics) {
	vars := make(map[string]cty.Value, len(c.Variables))
	for name, v := range c.Variables {
		if val, ok := s.Vars[name]; ok {
			vars[name] = val
		} else {
			vars[name] = cty.UnknownVal(v.Type)
		}
	}
	nodes := make(map[string]cty.Value, len(c.Nodes))
	// Values are immutable, so every node with no output known yet shares one object.
	notRun := InstanceObject(nil, nil)
	for name, n := range c.Nodes {
		switch {
		case n.Expanded():
			// Its instances are known once its for_each or count is evaluated (the planner's SetNodeValues).
			nodes[name] = cty.DynamicVal
		case len(s.Outputs[name]) == 0:
			nodes[name] = notRun
		default:
			nodes[name] = InstanceObject(s.Outputs[name], nil)
		}
	}
	ctx := &hcl.EvalContext{
		Variables: map[string]cty.Value{
			"var":  cty.ObjectVal(vars),
			"node": cty.ObjectVal(nodes),
		},
		Functions: funcs,
	}

	var diags hcl.Diagnostics
	locals := make(map[string]cty.Value, len(c.Locals))
	for name := range c.Locals {
		locals[name] = cty.DynamicVal
	}
	order, _ := c.localOrder()
	ctx.Variables["local"] = cty.ObjectVal(locals)
	for _, name := range order {
		val, d := c.Locals[name].Expr.Value(ctx)
		diags = append(diags, d...)
		if d.HasErrors() {
			val = cty.DynamicVal
		}
		locals[name] = val
		ctx.Variables["local"] = cty.ObjectVal(locals)
	}
	return ctx, diags
}

// EvalRunnerArgs evaluates a runner block's args for one node, with `model` bound to the node's routed model.
// It returns nil when the block has no args.
func EvalRunnerArgs(r *Runner, ctx *hcl.EvalContext, model string) ([]string, hcl.Diagnostics) {
	if r == nil || r.Args == nil {
		return nil, nil
	}
	child := ctx.NewChild()
	child.Variables = map[string]cty.Value{"model": cty.StringVal(model)}
	val, diags := r.Args.Value(child)
	if diags.HasErrors() {
		return nil, diags
	}
	return argsList(r, val)
}

func argsList(r *Runner, val cty.Value) ([]string, hcl.Diagnostics) {
	rng := r.Args.Range()
	where := fmt.Sprintf("runner %q", r.Name)
	if val.IsNull() {
		return nil, hcl.Diagnostics{errorDiag("Missing value",
			fmt.Sprintf("The args of %s are null. Give a list of strings, or remove the argument.", where), rng)}
	}
	ty := val.Type()
	if !(ty.IsListType() || ty.IsTupleType() || ty.IsSetType()) && ty != cty.DynamicPseudoType {
		return nil, hcl.Diagnostics{errorDiag("Wrong value type",
			fmt.Sprintf("The args of %s must be a list of strings, but this value is %s. Write it in brackets, for example args = [\"--model\", model].", where, typeName(ty)), rng)}
	}
	if !val.IsKnown() {
		return nil, hcl.Diagnostics{errorDiag("Unknown runner arguments",
			fmt.Sprintf("The args of %s depend on a value that is not known yet. Runner arguments may use only variables, locals and model.", where), rng)}
	}
	out := make([]string, 0, val.LengthInt())
	i := 0
	for it := val.ElementIterator(); it.Next(); i++ {
		_, ev := it.Element()
		if ev.IsNull() {
			return nil, hcl.Diagnostics{errorDiag("Missing value",
				fmt.Sprintf("Element %d of the args of %s is null. Every argument must be a string.", i, where), rng)}
		}
		sv, err := convert.Convert(ev, cty.String)
		if err != nil {
			return nil, hcl.Diagnostics{errorDiag("Wrong value type",
				fmt.Sprintf("Element %d of the args of %s is %s, not a string. Every argument must be a string.", i, where, typeName(ev.Type())), rng)}
		}
		if !sv.IsKnown() {
			return nil, hcl.Diagnostics{errorDiag("Unknown runner arguments",
				fmt.Sprintf("Element %d of the args of %s is not known yet. Runner arguments may use only variables, locals and model.", i, where), rng)}
		}
		out = append(out, sv.AsString())
	}
	return out, nil
}

// CheckValues evaluates what can be checked before variables are known: node attributes and runner args, with
// every variable, node output and file unknown. It catches wrong types and invalid literal values early, and
// Load makes it its last check.
//
// LoadForPlanning leaves it to the caller, to call after planning with planned reporting the nodes the plan
// evaluated, every instance without error. With known values an expression reports every error it reports with
// unknown ones: an unknown value only hides errors (a function is not called on it, an attribute or index of it
// is not looked up, a conditional on it reports neither result's errors). So the check is repeated only for the
// nodes the plan did not evaluate, and, as a precaution, for those holding a construct that reports errors by
// value (see valueDependent); with planned nil, every node is checked. Locals and runner args always are.
func (c *Config) CheckValues(planned func(node string) bool) hcl.Diagnostics {
	var nodes []*Node
	for _, n := range c.Nodes {
		if planned == nil || n.valueDependent || !planned(n.Name) {
			nodes = append(nodes, n)
		}
	}
	if len(nodes) == 0 && len(c.Locals) == 0 && !c.anyRunnerArgs() {
		return nil
	}
	ctx, diags := c.evalContext(&Scope{}, staticFunctions())
	// Blocks whose label was refused are missing from the model; references to them evaluate as unknown
	// rather than fail a second time.
	for key := range c.rejected {
		root, name, _ := strings.Cut(key, ".")
		obj := ctx.Variables[root].AsValueMap()
		if obj == nil {
			obj = map[string]cty.Value{}
		}
		obj[name] = cty.DynamicVal
		ctx.Variables[root] = cty.ObjectVal(obj)
	}
	// Nodes are evaluated independently of each other in the shared, read-only context, so in parallel; their
	// diagnostics are kept in name order.
	slices.SortFunc(nodes, func(a, b *Node) int { return strings.Compare(a.Name, b.Name) })
	perNode := make([]hcl.Diagnostics, len(nodes))
	parallel.For(len(nodes), func(i int) {
		n := nodes[i]
		_, d := evalExpansion(n, ctx, true)
		_, d2 := evalNode(n, ctx)
		perNode[i] = append(d, d2...)
	})
	for _, d := range perNode {
		diags = append(diags, d...)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Runners)) {
		r := c.Runners[name]
		if r.Args == nil {
			continue
		}
		child := ctx.NewChild()
		child.Variables = map[string]cty.Value{"model": cty.UnknownVal(cty.String)}
		val, d := r.Args.Value(child)
		diags = append(diags, d...)
		if d.HasErrors() || !val.IsKnown() {
			continue
		}
		ty := val.Type()
		if !(ty.IsListType() || ty.IsTupleType() || ty.IsSetType()) {
			_, d := argsList(r, val)
			diags = append(diags, d...)
			continue
		}
		i := 0
		for it := val.ElementIterator(); it.Next(); i++ {
			_, ev := it.Element()
			if !ev.IsKnown() {
				continue
			}
			if _, err := convert.Convert(ev, cty.String); err != nil || ev.IsNull() {
				_, d := argsList(r, val)
				diags = append(diags, d...)
				break
			}
		}
	}
	return diags
}

func (c *Config) anyRunnerArgs() bool {
	for _, r := range c.Runners {
		if r.Args != nil {
			return true
		}
	}
	return false
}
