package policyrules

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/kewplan/kewplan/config"
)

// projection is the node attributes the rules read, when each rule reads a node only through its attributes
// (n.model, plan.nodes in a for expression or length()); nil when any rule could see a node whole (keys(n),
// "${n}", n == m, plan.nodes[0], a splat), for which the node objects are built in full. A node's object holds
// only these attributes, which the rules cannot tell from the whole object; "name" is always kept, for naming
// the nodes a finding selects.
func projection(rules []*config.PolicyRule) map[string]bool {
	attrs := map[string]bool{"name": true}
	for _, r := range rules {
		se, ok := r.Condition.(hclsyntax.Expression)
		if !ok || !projectable(se, attrs) {
			return nil
		}
	}
	return attrs
}

// projectable walks one condition, adding the attributes it reads of a node to attrs; false when it may see a
// node whole.
func projectable(e hclsyntax.Expression, attrs map[string]bool) bool {
	w := &projectionWalker{attrs: attrs, nodeVars: map[string]int{}, ok: true}
	hclsyntax.Walk(e, w)
	return w.ok
}

type projectionWalker struct {
	attrs    map[string]bool
	nodeVars map[string]int // for-expression variables bound to plan.nodes, with their nesting count
	stack    []hclsyntax.Node
	ok       bool
}

func (w *projectionWalker) Enter(n hclsyntax.Node) hcl.Diagnostics {
	var parent hclsyntax.Node
	if len(w.stack) > 0 {
		parent = w.stack[len(w.stack)-1]
	}
	w.stack = append(w.stack, n)
	switch n := n.(type) {
	case *hclsyntax.SplatExpr, *hclsyntax.RelativeTraversalExpr, *hclsyntax.IndexExpr:
		w.ok = false
	case *hclsyntax.ForExpr:
		if isNodes(n.CollExpr) {
			w.nodeVars[n.ValVar]++
		}
	case *hclsyntax.ScopeTraversalExpr:
		w.traversal(n, parent)
	}
	return nil
}

func (w *projectionWalker) Exit(n hclsyntax.Node) hcl.Diagnostics {
	w.stack = w.stack[:len(w.stack)-1]
	if f, ok := n.(*hclsyntax.ForExpr); ok && isNodes(f.CollExpr) {
		if w.nodeVars[f.ValVar]--; w.nodeVars[f.ValVar] == 0 {
			delete(w.nodeVars, f.ValVar)
		}
	}
	return nil
}

func (w *projectionWalker) traversal(t *hclsyntax.ScopeTraversalExpr, parent hclsyntax.Node) {
	tr := t.Traversal
	root := tr.RootName()
	switch {
	case w.nodeVars[root] > 0:
		// n.model: the node's attribute; n alone sees the node whole, but for the count of
		// length([for n in plan.nodes : n if ...]).
		attr, ok := attrStep(tr, 1)
		if !ok {
			w.ok = len(tr) == 1 && w.countedOnly(t, parent) && w.ok
			return
		}
		w.attrs[attr] = true
	case root == config.RuleRootPlan:
		a, ok := attrStep(tr, 1)
		if !ok {
			w.ok = false // plan alone, or plan["nodes"]
			return
		}
		if a != "nodes" {
			return // plan.totals, plan.budget, ...
		}
		if len(tr) > 2 {
			w.ok = false // plan.nodes[0]...
			return
		}
		// plan.nodes: only as a for expression's collection or length()'s argument.
		switch p := parent.(type) {
		case *hclsyntax.ForExpr:
			if p.CollExpr == hclsyntax.Expression(t) {
				return
			}
		case *hclsyntax.FunctionCallExpr:
			if p.Name == "length" && len(p.Args) == 1 {
				return
			}
		}
		w.ok = false
	}
}

// countedOnly reports whether t is the value of a for expression whose tuple only length() reads.
func (w *projectionWalker) countedOnly(t *hclsyntax.ScopeTraversalExpr, parent hclsyntax.Node) bool {
	// A for expression's value is walked inside a ChildScope: [..., length(), for, ChildScope, t].
	if _, ok := parent.(hclsyntax.ChildScope); !ok || len(w.stack) < 4 {
		return false
	}
	f, ok := w.stack[len(w.stack)-3].(*hclsyntax.ForExpr)
	if !ok || f.ValExpr != hclsyntax.Expression(t) || f.KeyExpr != nil {
		return false
	}
	call, ok := w.stack[len(w.stack)-4].(*hclsyntax.FunctionCallExpr)
	return ok && call.Name == "length" && len(call.Args) == 1 && call.Args[0] == hclsyntax.Expression(f)
}

// attrStep is the name of step i of tr when it is an attribute.
func attrStep(tr hcl.Traversal, i int) (string, bool) {
	if len(tr) <= i {
		return "", false
	}
	a, ok := tr[i].(hcl.TraverseAttr)
	return a.Name, ok
}

// isNodes reports whether e is plan.nodes.
func isNodes(e hclsyntax.Expression) bool {
	t, ok := e.(*hclsyntax.ScopeTraversalExpr)
	if !ok || len(t.Traversal) != 2 || t.Traversal.RootName() != config.RuleRootPlan {
		return false
	}
	a, ok := attrStep(t.Traversal, 1)
	return ok && a == "nodes"
}
