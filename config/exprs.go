package config

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// valueDependent reports whether expr holds a construct whose errors HCL reports or leaves out by value: a
// conditional reports the errors of the result its condition chooses, none while the condition is unknown; &&
// and || leave out an operand's errors by the other's value; try() and can() keep their arguments' errors only
// when every argument fails. By HCL's rules each of them reports no fewer errors with known values than with
// unknown ones, like any other expression, but CheckValues evaluates a node holding one again after planning
// anyway, so that deferring the check never rests on that reading. An expression that is not native syntax
// counts as value-dependent, having no syntax to walk.
func valueDependent(expr hcl.Expression) bool {
	switch e := expr.(type) {
	case *hclsyntax.LiteralValueExpr, *hclsyntax.ScopeTraversalExpr:
		return false
	case *hclsyntax.TemplateWrapExpr:
		return valueDependent(e.Wrapped)
	case *hclsyntax.TemplateExpr:
		return anyValueDependent(e.Parts)
	case *hclsyntax.TupleConsExpr:
		return anyValueDependent(e.Exprs)
	case hclsyntax.Expression:
		found := false
		hclsyntax.VisitAll(e, func(node hclsyntax.Node) hcl.Diagnostics {
			switch e := node.(type) {
			case *hclsyntax.ConditionalExpr:
				found = true
			case *hclsyntax.BinaryOpExpr:
				found = found || e.Op == hclsyntax.OpLogicalAnd || e.Op == hclsyntax.OpLogicalOr
			case *hclsyntax.FunctionCallExpr:
				found = found || e.Name == "try" || e.Name == "can"
			}
			return nil
		})
		return found
	}
	return true
}

func anyValueDependent(exprs []hclsyntax.Expression) bool {
	for _, e := range exprs {
		if valueDependent(e) {
			return true
		}
	}
	return false
}

// isLiteral reports whether expr is a literal value or a template of literal text: what evaluates the same in
// any context, an empty one included.
func isLiteral(expr hcl.Expression) bool {
	switch e := expr.(type) {
	case *hclsyntax.LiteralValueExpr:
		return true
	case *hclsyntax.TemplateWrapExpr:
		return isLiteral(e.Wrapped)
	case *hclsyntax.TemplateExpr:
		for _, part := range e.Parts {
			if _, ok := part.(*hclsyntax.LiteralValueExpr); !ok {
				return false
			}
		}
		return true
	}
	return false
}

// exprValue is expr.Value(ctx), without the work HCL's template evaluation does for a quoted string with no
// interpolation (a buffer, a copy of the text and its normalization, each time): most attributes are such
// strings, whose value is their one literal part's.
func exprValue(expr hcl.Expression, ctx *hcl.EvalContext) (cty.Value, hcl.Diagnostics) {
	if lit := quotedLiteral(expr); lit != nil {
		return lit.Val, nil
	}
	return expr.Value(ctx)
}

// quotedLiteral is the one literal part of a quoted string without interpolation; nil for any other expression.
func quotedLiteral(expr hcl.Expression) *hclsyntax.LiteralValueExpr {
	if t, ok := expr.(*hclsyntax.TemplateExpr); ok && len(t.Parts) == 1 {
		if lit, ok := t.Parts[0].(*hclsyntax.LiteralValueExpr); ok && lit.Val.Type() == cty.String &&
			lit.Val.IsKnown() && !lit.Val.IsNull() && !lit.Val.IsMarked() {
			return lit
		}
	}
	return nil
}

// quotedString is the text of a quoted string without interpolation.
func quotedString(expr hcl.Expression) (string, bool) {
	if lit := quotedLiteral(expr); lit != nil {
		return lit.Val.AsString(), true
	}
	return "", false
}

// expressionVariables is expr.Variables(): the traversals expr refers to, in source order. Literals, references,
// templates and tuples, which most attributes are made of, are read directly; every other kind of expression (a
// for expression opens a scope of its own) is left to hclsyntax.Variables' walk, which allocates a visitor and
// scope bookkeeping for every node it visits.
func expressionVariables(expr hcl.Expression) []hcl.Traversal {
	var out []hcl.Traversal
	var walk func(e hcl.Expression)
	walk = func(e hcl.Expression) {
		switch e := e.(type) {
		case *hclsyntax.LiteralValueExpr:
		case *hclsyntax.ScopeTraversalExpr:
			out = append(out, e.Traversal)
		case *hclsyntax.TemplateWrapExpr:
			walk(e.Wrapped)
		case *hclsyntax.TemplateExpr:
			for _, part := range e.Parts {
				walk(part)
			}
		case *hclsyntax.TupleConsExpr:
			for _, el := range e.Exprs {
				walk(el)
			}
		default:
			out = append(out, e.Variables()...)
		}
	}
	walk(expr)
	return out
}
