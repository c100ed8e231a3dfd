package planner

import (
	"container/heap"
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/internal/parallel"
)

// instance is one node instance being planned: a node block without for_each or count has exactly one.
type instance struct {
	block int // index into graph.names
	inst  *config.Instance
	// nv and diags are the evaluation of the instance's attributes; nv is nil for the placeholder of a node
	// whose for_each or count could not be evaluated, or that sits on a dependency cycle.
	nv    *config.NodeValues
	diags hcl.Diagnostics
	deps  []int // instances it waits for, by index into expansion.insts
	users []int
}

// expansion is every instance of the nodes planned, indexed in name order (block name, then key order), which is
// the order ties are broken in.
type expansion struct {
	insts   []*instance
	byBlock [][]int // block -> its instances; nil for a block outside the targets' closure
	byAddr  map[string]int
	failed  []bool // the block has one placeholder instance and an error
}

// parsedTarget is one --target: a whole node, or one instance.
type parsedTarget struct {
	raw  string
	name string
	key  cty.Value // cty.NilVal: every instance
}

// parseTargets splits --target addresses into node names and keys.
func parseTargets(targets []string) ([]parsedTarget, hcl.Diagnostics) {
	var out []parsedTarget
	var diags hcl.Diagnostics
	for _, t := range targets {
		name, key, err := config.ParseInstanceAddress(t)
		if err != nil {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid target address",
				Detail: fmt.Sprintf("--target %s: %v. Quote the address for the shell, for example --target 'fix[\"api\"]'.", safeText(t), err)})
			continue
		}
		out = append(out, parsedTarget{raw: t, name: name, key: key})
	}
	return out, diags
}

// safeText quotes user input for a message when it holds anything a terminal could act on.
func safeText(s string) string {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return fmt.Sprintf("%q", s)
		}
	}
	return s
}

// expand evaluates, in dependency order, the for_each or count of every selected node and then each of its
// instances, making each node's value (its instances' outputs and plan-time attributes) visible to the nodes
// that refer to it. A node is evaluated with a context that holds only the nodes it refers to, so the work is
// linear in the references, not quadratic in the nodes.
func (b *builder) expand(g *graph, blockOrder []int, sel, cyclic []bool) (*expansion, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	x := &expansion{byBlock: make([][]int, len(g.names)), failed: make([]bool, len(g.names))}
	values := b.ctx.Variables["node"].AsValueMap()
	if values == nil {
		values = map[string]cty.Value{}
	}
	localsOnNodes := b.localsReferToNodes()
	perBlock := make([][]*instance, len(g.names))
	// Without locals that refer to nodes, a node's dependents see of it only its instances and their repositories
	// (node.<name>.repo; its outputs are the apply's). So the walk in dependency order evaluates just those, and
	// builds a block's context only when its expansion or repository needs one; afterwards each block gets its
	// context and every instance is evaluated in full, in parallel. With such locals, the context changes as nodes
	// are expanded, and each instance is evaluated in full in the walk.
	ctxs := make([]*hcl.EvalContext, len(g.names))
	evaluate := make([]bool, len(g.names))
	// Instances whose outputs are all unknown look the same to their dependents when their repositories are the
	// same: one object serves them all.
	unknownOutputs := map[string]cty.Value{}
	for _, i := range blockOrder {
		if !sel[i] {
			continue
		}
		n := g.nodes[i]
		if cyclic[i] && n.Expanded() {
			// Its for_each would only fail on the values the cycle never produces; the cycle is reported.
			x.failed[i] = true
			perBlock[i] = []*instance{{block: i, inst: &config.Instance{Address: n.Name, Slug: n.Name}}}
			continue
		}
		ctx := func() *hcl.EvalContext {
			if ctxs[i] == nil {
				ctxs[i] = b.blockContext(g, i, values)
			}
			return ctxs[i]
		}
		var expansionCtx *hcl.EvalContext // a node without for_each or count has its one instance without evaluating
		if n.Expanded() {
			expansionCtx = ctx()
		}
		insts, d := config.EvalExpansion(n, expansionCtx)
		if d.HasErrors() {
			x.failed[i] = true
			perBlock[i] = []*instance{{block: i, inst: &config.Instance{Address: n.Name, Slug: n.Name}, diags: d}}
			continue
		}
		diags = append(diags, d...)
		list := make([]*instance, len(insts))
		objects := make([]cty.Value, len(insts))
		for k, inst := range insts {
			list[k] = &instance{block: i, inst: inst}
			var repo string
			if localsOnNodes {
				list[k].nv, list[k].diags = config.EvalInstance(n, inst, ctx())
				repo = list[k].nv.Repo
			} else {
				repo = config.EvalInstanceRepo(n, inst, ctx)
			}
			outputs := b.in.Outputs[inst.Address]
			if obj, ok := unknownOutputs[repo]; ok && len(outputs) == 0 {
				objects[k] = obj
				continue
			}
			planned := map[string]cty.Value{}
			if repo != "" {
				planned["repo"] = cty.StringVal(repo)
			}
			objects[k] = config.InstanceObject(outputs, planned)
			if len(outputs) == 0 {
				unknownOutputs[repo] = objects[k]
			}
		}
		perBlock[i], evaluate[i] = list, true
		values[n.Name] = config.NodeValue(n, insts, objects)
		if localsOnNodes {
			// Reported once below, from the last evaluation, which sees every node.
			_ = b.cfg.SetNodeValues(b.ctx, values)
		}
	}
	if localsOnNodes {
		diags = append(diags, b.cfg.SetNodeValues(b.ctx, values)...)
	} else {
		// values is complete and only read from here on.
		parallel.For(len(blockOrder), func(k int) {
			if i := blockOrder[k]; evaluate[i] && ctxs[i] == nil {
				ctxs[i] = b.blockContext(g, i, values)
			}
		})
		var todo []*instance
		for _, i := range blockOrder {
			if evaluate[i] {
				todo = append(todo, perBlock[i]...)
			}
		}
		parallel.For(len(todo), func(k int) {
			in := todo[k]
			in.nv, in.diags = config.EvalInstance(g.nodes[in.block], in.inst, ctxs[in.block])
		})
	}
	x.byAddr = map[string]int{}
	for i := range g.names {
		for _, in := range perBlock[i] {
			x.byBlock[i] = append(x.byBlock[i], len(x.insts))
			x.byAddr[in.inst.Address] = len(x.insts)
			x.insts = append(x.insts, in)
		}
	}
	return x, diags
}

// localsReferToNodes reports whether a local value refers to a node, so that locals must be evaluated again as
// nodes are expanded.
func (b *builder) localsReferToNodes() bool {
	for _, l := range b.cfg.Locals {
		for _, t := range l.Expr.Variables() {
			if t.RootName() == "node" {
				return true
			}
		}
	}
	return false
}

// blockContext is the evaluation context of node i: node.<name> holds the nodes it refers to, as far as they
// are known.
func (b *builder) blockContext(g *graph, i int, values map[string]cty.Value) *hcl.EvalContext {
	if len(g.deps[i]) == 0 {
		return b.ctx
	}
	nodes := make(map[string]cty.Value, len(g.deps[i]))
	for _, j := range g.deps[i] {
		v, ok := values[g.names[j]]
		if !ok {
			v = cty.DynamicVal
		}
		nodes[g.names[j]] = v
	}
	child := b.ctx.NewChild()
	child.Variables = map[string]cty.Value{"node": cty.ObjectVal(nodes)}
	return child
}

// link gives each instance its dependencies: the instance a reference names (node.fix["api"], node.fix[each.key],
// or the same key through for_each = node.fix), and every instance of a node referred to as a whole.
func (b *builder) link(g *graph, x *expansion) hcl.Diagnostics {
	var diags hcl.Diagnostics
	seen := map[int]bool{}
	for i := range g.names {
		n := g.nodes[i]
		for _, a := range x.byBlock[i] {
			in := x.insts[a]
			clear(seen)
			add := func(d int) {
				if !seen[d] {
					seen[d] = true
					in.deps = append(in.deps, d)
				}
			}
			for k, j := range g.deps[i] {
				targets := x.byBlock[j]
				ref := g.refs[i][k]
				if !g.nodes[j].Expanded() || x.failed[j] || x.failed[i] || ref.Whole {
					for _, d := range targets {
						add(d)
					}
					continue
				}
				whole := false
				if ref.ForEach {
					if d, ok := x.byAddr[config.InstanceAddress(g.names[j], in.inst.Key)]; ok {
						add(d)
					} else {
						whole = true
					}
				}
				for _, key := range ref.Keys {
					if d, ok := x.find(g.names[j], key); ok {
						add(d)
					} else if ref.Explicit && a == x.byBlock[i][0] {
						diags = append(diags, missingInstanceDiag(g.names[j], key, x, targets, ref.Range))
					}
				}
				for _, e := range ref.KeyExprs {
					v, d := e.Value(config.InstanceContext(b.ctx, n, in.inst))
					if d.HasErrors() || !v.IsWhollyKnown() || v.IsNull() {
						whole = true
						continue
					}
					if d, ok := x.find(g.names[j], v); ok {
						add(d)
					}
				}
				if whole {
					for _, d := range targets {
						add(d)
					}
				}
			}
			for _, d := range in.deps {
				x.insts[d].users = append(x.insts[d].users, a)
			}
		}
	}
	return diags
}

// find returns the instance of node name with the key, converting the key to the node's key type.
func (x *expansion) find(name string, key cty.Value) (int, bool) {
	if !key.IsKnown() || key.IsNull() {
		return 0, false
	}
	for _, ty := range []cty.Type{cty.String, cty.Number} {
		if ty == cty.Number && key.Type() != cty.Number {
			continue
		}
		k, err := convert.Convert(key, ty)
		if err != nil {
			continue
		}
		if d, ok := x.byAddr[config.InstanceAddress(name, k)]; ok {
			return d, true
		}
	}
	return 0, false
}

func missingInstanceDiag(name string, key cty.Value, x *expansion, targets []int, rng hcl.Range) *hcl.Diagnostic {
	var keys []string
	for k, t := range targets {
		if k == 5 {
			keys = append(keys, fmt.Sprintf("and %d more", len(targets)-5))
			break
		}
		keys = append(keys, strings.TrimPrefix(x.insts[t].inst.Address, name))
	}
	what := "it has no instances"
	if len(keys) > 0 {
		what = "its instances are " + strings.Join(keys, ", ")
	}
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Reference to undeclared node instance", Subject: rangePtr(rng),
		Detail: fmt.Sprintf("depends_on names %s, which is not an instance of node %q: %s. Correct the key, or name the whole node as node.%s.", config.InstanceAddress(name, key), name, what, name)}
}

// selectTargets marks the targeted instances and everything they depend on.
func (x *expansion) selectTargets(g *graph, targets []parsedTarget) ([]bool, hcl.Diagnostics) {
	sel := make([]bool, len(x.insts))
	var diags hcl.Diagnostics
	var stack []int
	mark := func(a int) {
		if !sel[a] {
			sel[a] = true
			stack = append(stack, a)
		}
	}
	for _, t := range targets {
		i, ok := g.index[t.name]
		if !ok {
			continue // reported by graph.closure
		}
		switch {
		case t.key == cty.NilVal || x.failed[i]:
			for _, a := range x.byBlock[i] {
				mark(a)
			}
		case !g.nodes[i].Expanded():
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unknown target",
				Detail: fmt.Sprintf("--target names %s, but node %q has neither for_each nor count, so it has no instances. Target it as --target %s.", safeText(t.raw), t.name, t.name)})
		default:
			a, ok := x.find(t.name, t.key)
			if !ok {
				var keys []string
				for k, b := range x.byBlock[i] {
					if k == 5 {
						keys = append(keys, "...")
						break
					}
					keys = append(keys, x.insts[b].inst.Address)
				}
				detail := fmt.Sprintf("--target names %s, which is not an instance of node %q.", safeText(t.raw), t.name)
				if len(keys) > 0 {
					detail += fmt.Sprintf(" Its instances are %s.", strings.Join(keys, ", "))
				} else {
					detail += " It has no instances."
				}
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unknown target", Detail: detail})
				continue
			}
			mark(a)
		}
	}
	for len(stack) > 0 {
		a := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, d := range x.insts[a].deps {
			mark(d)
		}
	}
	return sel, diags
}

// order sorts the selected instances topologically (Kahn's algorithm; among the instances ready at once, the first
// in name order goes first). Instances on or behind a cycle follow in name order; the node graph reports cycles.
func (x *expansion) order(sel []bool) []int {
	indeg := make([]int, len(x.insts))
	ready := nameHeap{}
	total := 0
	for a, in := range x.insts {
		if !sel[a] {
			continue
		}
		total++
		indeg[a] = len(in.deps)
		if indeg[a] == 0 {
			ready = append(ready, a)
		}
	}
	heap.Init(&ready)
	order := make([]int, 0, total)
	for ready.Len() > 0 {
		a := heap.Pop(&ready).(int)
		order = append(order, a)
		for _, u := range x.insts[a].users {
			if !sel[u] {
				continue
			}
			indeg[u]--
			if indeg[u] == 0 {
				heap.Push(&ready, u)
			}
		}
	}
	for a := range x.insts {
		if sel[a] && indeg[a] > 0 {
			order = append(order, a)
		}
	}
	return order
}

// checkSlugs refuses two nodes whose container, branch and log names would be the same: node "fix-api" and the
// instance fix["api"] of node "fix", say. Each would overwrite the other's branch and logs.
func checkSlugs(nodes []*NodePlan) hcl.Diagnostics {
	var diags hcl.Diagnostics
	seen := make(map[string]*NodePlan, len(nodes))
	for _, np := range nodes {
		prev, ok := seen[np.Slug]
		if !ok {
			seen[np.Slug] = np
			continue
		}
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Instance names collide", Subject: rangePtr(np.DeclRange),
			Detail: fmt.Sprintf("%s and %s would both run in the container %s%s and push to the branch %s%s by default, so one would overwrite the other's work. Rename one of the nodes, or change the key.", capitalise(describeNode(prev.Name)), describeNode(np.Name), ContainerPrefix, np.Slug, config.DefaultBranchPrefix, np.Slug)})
		np.Errors, np.Container = true, nil
	}
	return diags
}

// checkSharedBranches refuses instances of one worker node that would push to the same branch of the same
// repository: a branch written without each.key or count.index.
func checkSharedBranches(cfg *config.Config, nodes []*NodePlan) hcl.Diagnostics {
	var diags hcl.Diagnostics
	type key struct{ block, repo, branch string }
	first := map[key]*NodePlan{}
	reported := map[key]bool{}
	for _, np := range nodes {
		if np.Key == cty.NilVal || np.Role != config.RoleWorker || np.Branch == "" || np.Repo == "" || contains(np.Unknown, "branch") {
			continue
		}
		k := key{np.Block, np.Repo, np.Branch}
		prev, ok := first[k]
		if !ok {
			first[k] = np
			continue
		}
		np.Errors, np.Container = true, nil
		prev.Errors, prev.Container = true, nil
		if reported[k] {
			continue
		}
		reported[k] = true
		subject := rangePtr(np.DeclRange)
		if n := cfg.Nodes[np.Block]; n != nil && n.Branch != nil {
			subject = rangePtr(n.Branch.Range())
		}
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Instances share a branch", Subject: subject,
			Detail: fmt.Sprintf("%s and %s both push to the branch %q of %s, so the second push would be refused or would replace the first one's work. Make the branch depend on the instance, for example branch = \"kew/lint-${each.key}\".", capitalise(describeNode(prev.Name)), describeNode(np.Name), np.Branch, np.Repo)})
	}
	return diags
}

// describeNode names a node or an instance in a message: node "fix", or node fix["api"].
func describeNode(addr string) string {
	if strings.ContainsRune(addr, '[') {
		return "node " + addr
	}
	return fmt.Sprintf("node %q", addr)
}

func capitalise(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
