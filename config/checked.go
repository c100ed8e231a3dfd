package config

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// checkedValue is an attribute's value from the load-time check (checkStaticValues), kept with the values its
// references had there. Evaluating an expression is a function of its references' values alone: every function
// but file and templatefile is pure, and an expression calling those is not kept. So an evaluation in which
// every reference has the same value (raw-equal: type, marks and refinements included) has this value and, like
// the check's, no diagnostics. That is how a node is evaluated once, not twice, when its attributes are literals
// or refer only to what is still unknown at plan time, such as another node's commit.
type checkedValue struct {
	expr hcl.Expression // native syntax, so a pointer: compared by identity
	val  cty.Value
	refs []hcl.Traversal
	at   []cty.Value // the values of refs where the check evaluated
}

// evalAttribute evaluates one attribute of n, or reuses the load-time check's value of it (see checkedValue).
// With record, it keeps the value for later evaluations when it can be reused.
func (n *Node) evalAttribute(name string, expr hcl.Expression, ctx *hcl.EvalContext, record bool) (cty.Value, hcl.Diagnostics) {
	if cv := n.checked[name]; cv != nil && !record && cv.expr == expr && cv.sameReferences(ctx) {
		return cv.val, nil
	}
	v, diags := expr.Value(ctx)
	if record && len(diags) == 0 && !callsFileFunction(expr) {
		if cv := newCheckedValue(v, expr, n.variables(expr), ctx); cv != nil {
			if n.checked == nil {
				n.checked = map[string]*checkedValue{}
			}
			n.checked[name] = cv
		}
	}
	return v, diags
}

// newCheckedValue keeps v with its references' values in ctx; nil when a reference does not evaluate on its own
// (as inside try()), which leaves nothing to compare.
func newCheckedValue(v cty.Value, expr hcl.Expression, refs []hcl.Traversal, ctx *hcl.EvalContext) *checkedValue {
	cv := &checkedValue{expr: expr, val: v, refs: refs, at: make([]cty.Value, len(refs))}
	for i, t := range refs {
		rv, diags := t.TraverseAbs(ctx)
		if diags.HasErrors() {
			return nil
		}
		cv.at[i] = rv
	}
	return cv
}

// sameReferences reports whether every reference has in ctx the value it had where the check evaluated.
func (cv *checkedValue) sameReferences(ctx *hcl.EvalContext) bool {
	for i, t := range cv.refs {
		rv, diags := t.TraverseAbs(ctx)
		if diags.HasErrors() || !rv.RawEquals(cv.at[i]) {
			return false
		}
	}
	return true
}

// callsFileFunction reports whether expr calls file() or templatefile(), which read files at plan time but
// return unknown values in the load-time check. An expression that is not native syntax counts as calling them,
// so that every expression kept is a pointer (see checkedValue.expr).
func callsFileFunction(expr hcl.Expression) bool {
	syn, ok := expr.(hclsyntax.Expression)
	if !ok {
		return true // not native syntax: no walk to tell, so never reused
	}
	if isPlainExpr(syn) {
		return false
	}
	found := false
	hclsyntax.VisitAll(syn, func(node hclsyntax.Node) hcl.Diagnostics {
		if call, ok := node.(*hclsyntax.FunctionCallExpr); ok && (call.Name == "file" || call.Name == "templatefile") {
			found = true
		}
		return nil
	})
	return found
}
