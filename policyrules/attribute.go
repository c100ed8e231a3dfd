package policyrules

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/jsonplan"
)

// attribute finds the nodes a matched rule names: for each outermost for expression over plan.nodes,
// change.widenings or change.narrowings, the elements its body selects (its `if` clause is true, or, without
// one, its value is true). A rule written over totals names no node, and its finding points at its condition
// alone.
func attribute(expr hcl.Expression, e *env) ([]jsonplan.PolicyFindingNode, int) {
	se, ok := expr.(hclsyntax.Expression)
	if !ok {
		return nil, 0
	}
	var fors []*hclsyntax.ForExpr
	depth := 0
	hclsyntax.Walk(se, walkFunc{
		enter: func(n hclsyntax.Node) {
			if f, ok := n.(*hclsyntax.ForExpr); ok {
				if depth == 0 && namesNodes(f.CollExpr) {
					fors = append(fors, f)
				}
				depth++
			}
		},
		exit: func(n hclsyntax.Node) {
			if _, ok := n.(*hclsyntax.ForExpr); ok {
				depth--
			}
		},
	})
	seen := map[string]bool{}
	var out []jsonplan.PolicyFindingNode
	more := 0
	add := func(name string) {
		if name == "" || seen[name] {
			return
		}
		seen[name] = true
		if len(out) == MaxFindingNodes {
			more++
			return
		}
		fn := jsonplan.PolicyFindingNode{Name: name}
		if n := e.doc.Node(name); n != nil {
			fn.Range = n.Range
		}
		out = append(out, fn)
	}
	for _, f := range fors {
		if isNodes(f.CollExpr) {
			for i := range e.doc.Nodes {
				if selectedNode(f, e, i) {
					add(e.doc.Nodes[i].Name)
				}
			}
			continue
		}
		coll, diags := f.CollExpr.Value(e.hclContext())
		if diags.HasErrors() || coll.IsNull() || !coll.CanIterateElements() {
			continue
		}
		for it := coll.ElementIterator(); it.Next(); {
			k, v := it.Element()
			if selected(f, e, k, v) {
				add(elementNode(v))
			}
		}
	}
	return out, more
}

// selectedNode is selected for plan.nodes[i], read from its document when the shortcut can.
func selectedNode(f *hclsyntax.ForExpr, e *env, i int) bool {
	fast := rootScope(e).push(f.KeyVar, f.ValVar)
	fast.node = i
	if f.KeyVar != "" {
		fast.key = cty.NumberIntVal(int64(i))
	}
	if v, ok := selectedFast(f, fast); ok {
		return v
	}
	return selected(f, e, cty.NumberIntVal(int64(i)), e.node(i))
}

// selectedFast is selected by the shortcut; ok false when it declines.
func selectedFast(f *hclsyntax.ForExpr, s *scope) (bool, bool) {
	if f.CondExpr != nil {
		if c, ok := fastEval(f.CondExpr, s); ok && plain(c) && c.Type() == cty.Bool {
			return c.True(), true
		}
		return false, false
	}
	if r, ok := fastEval(f.ValExpr, s); ok {
		return holdsTrue(r), true
	}
	return false, false
}

// namesNodes reports whether a for expression's collection is one whose elements are nodes.
func namesNodes(e hclsyntax.Expression) bool {
	t, ok := e.(*hclsyntax.ScopeTraversalExpr)
	if !ok || len(t.Traversal) != 2 {
		return false
	}
	attr, ok := t.Traversal[1].(hcl.TraverseAttr)
	if !ok {
		return false
	}
	switch t.Traversal.RootName() {
	case config.RuleRootPlan:
		return attr.Name == "nodes"
	case config.RuleRootChange:
		return attr.Name == "widenings" || attr.Name == "narrowings"
	}
	return false
}

func selected(f *hclsyntax.ForExpr, e *env, k, v cty.Value) bool {
	fast := rootScope(e).push(f.KeyVar, f.ValVar)
	fast.set(k, v)
	if sel, ok := selectedFast(f, fast); ok {
		return sel
	}
	child := e.hclContext().NewChild()
	child.Variables = map[string]cty.Value{f.ValVar: v}
	if f.KeyVar != "" {
		child.Variables[f.KeyVar] = k
	}
	isTrue := func(x hclsyntax.Expression) bool {
		r, diags := x.Value(child)
		return !diags.HasErrors() && holdsTrue(r)
	}
	if f.CondExpr != nil {
		return isTrue(f.CondExpr)
	}
	return isTrue(f.ValExpr)
}

// holdsTrue reports whether v is true, or a list holding a true value (the body of an outer for expression
// whose inner one checks each of a node's credentials, say).
func holdsTrue(v cty.Value) bool {
	if !v.IsKnown() || v.IsNull() {
		return false
	}
	if v.Type().Equals(cty.Bool) {
		return v.True()
	}
	if t := v.Type(); t.IsListType() || t.IsTupleType() || t.IsSetType() {
		for it := v.ElementIterator(); it.Next(); {
			if _, e := it.Element(); holdsTrue(e) {
				return true
			}
		}
	}
	return false
}

// elementNode is the node an element of plan.nodes (its name) or change.widenings (its node) stands for.
func elementNode(v cty.Value) string {
	if v.IsNull() || !v.Type().IsObjectType() {
		return ""
	}
	for _, attr := range []string{"node", "name"} {
		if v.Type().HasAttribute(attr) {
			if s := v.GetAttr(attr); !s.IsNull() && s.Type() == cty.String && s.AsString() != "" {
				return s.AsString()
			}
		}
	}
	return ""
}

type walkFunc struct{ enter, exit func(hclsyntax.Node) }

func (w walkFunc) Enter(n hclsyntax.Node) hcl.Diagnostics { w.enter(n); return nil }
func (w walkFunc) Exit(n hclsyntax.Node) hcl.Diagnostics  { w.exit(n); return nil }
