package policyrules

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"

	"github.com/kewplan/kewplan/config"
)

// fastEval evaluates the common shapes of a condition (for expressions, comparisons, logic, traversals, literals,
// function calls) directly over the cty values, without the per-element contexts and operator calls of HCL's
// evaluator, which dominate a rule's cost on a large plan. It is a shortcut, not a second language: ok is false
// for any other shape and on any error or type that is not exactly what it expects, and the caller then
// evaluates with HCL, whose result and diagnostics are authoritative. Where fastEval does answer, it answers as
// HCL does: every element of a for expression is evaluated (an error in any sends the rule to HCL), and && and ||
// decide on their left operand only where HCL ignores the right one too.
func fastEval(e hclsyntax.Expression, s *scope) (cty.Value, bool) {
	switch e := e.(type) {
	case *hclsyntax.LiteralValueExpr:
		return e.Val, true
	case *hclsyntax.TemplateExpr:
		if e.IsStringLiteral() {
			return e.Parts[0].(*hclsyntax.LiteralValueExpr).Val, true
		}
	case *hclsyntax.TemplateWrapExpr:
		return fastEval(e.Wrapped, s)
	case *hclsyntax.ParenthesesExpr:
		if inner, ok := e.Expression.(hclsyntax.Expression); ok {
			return fastEval(inner, s)
		}
	case *hclsyntax.ScopeTraversalExpr:
		return fastTraversal(e.Traversal, s)
	case *hclsyntax.UnaryOpExpr:
		v, ok := fastEval(e.Val, s)
		if !ok || !plain(v) {
			return cty.NilVal, false
		}
		switch {
		case e.Op == hclsyntax.OpLogicalNot && v.Type() == cty.Bool:
			return v.Not(), true
		case e.Op == hclsyntax.OpNegate && v.Type() == cty.Number:
			return v.Negate(), true
		}
	case *hclsyntax.BinaryOpExpr:
		return fastBinary(e, s)
	case *hclsyntax.ConditionalExpr:
		c, ok := fastEval(e.Condition, s)
		if !ok || !plain(c) || c.Type() != cty.Bool {
			return cty.NilVal, false
		}
		// HCL evaluates both results and unifies their types; only the same type on both sides is taken here.
		t, ok1 := fastEval(e.TrueResult, s)
		f, ok2 := fastEval(e.FalseResult, s)
		if !ok1 || !ok2 || !t.Type().Equals(f.Type()) {
			return cty.NilVal, false
		}
		if c.True() {
			return t, true
		}
		return f, true
	case *hclsyntax.TupleConsExpr:
		vals := make([]cty.Value, len(e.Exprs))
		for i, x := range e.Exprs {
			v, ok := fastEval(x, s)
			if !ok {
				return cty.NilVal, false
			}
			vals[i] = v
		}
		return cty.TupleVal(vals), true
	case *hclsyntax.ForExpr:
		return fastFor(e, s)
	case *hclsyntax.FunctionCallExpr:
		return fastCall(e, s)
	}
	return cty.NilVal, false
}

// plain reports whether v is known, not null and unmarked: the only values fastEval operates on.
func plain(v cty.Value) bool { return v.IsKnown() && !v.IsNull() && !v.IsMarked() }

func fastTraversal(t hcl.Traversal, s *scope) (cty.Value, bool) {
	v, node, kind := s.lookup(t.RootName())
	steps := t[1:]
	switch kind {
	case kindNone:
		return cty.NilVal, false
	case kindNode:
		// n.model, n over plan.nodes: the attribute from the node's document; n alone is HCL's.
		if len(steps) == 0 {
			return cty.NilVal, false
		}
		a, ok := steps[0].(hcl.TraverseAttr)
		if !ok {
			return cty.NilVal, false
		}
		attr, ok := s.env.nodeAttribute(node, a.Name)
		if !ok {
			return cty.NilVal, false
		}
		v, steps = attr, steps[1:]
	case kindPlan:
		if a, ok := firstAttr(steps); ok && a != "nodes" {
			v = s.env.head // plan.totals.nodes: no node object is needed
		} else {
			v = s.env.fullPlan()
		}
	}
	for i, step := range steps {
		a, ok := step.(hcl.TraverseAttr)
		if !ok {
			// An index step: HCL's own traversal, from here on.
			rest, diags := steps[i:].TraverseRel(v)
			if diags.HasErrors() {
				return cty.NilVal, false
			}
			return rest, true
		}
		// An attribute of an object, as hcl.GetAttr reads it; anything else (a map, null, a missing
		// attribute) is HCL's.
		if !plain(v) || !v.Type().IsObjectType() || !v.Type().HasAttribute(a.Name) {
			return cty.NilVal, false
		}
		v = v.GetAttr(a.Name)
	}
	return v, true
}

func firstAttr(steps hcl.Traversal) (string, bool) {
	if len(steps) == 0 {
		return "", false
	}
	a, ok := steps[0].(hcl.TraverseAttr)
	return a.Name, ok
}

func fastBinary(e *hclsyntax.BinaryOpExpr, s *scope) (cty.Value, bool) {
	l, ok := fastEval(e.LHS, s)
	if !ok {
		return cty.NilVal, false
	}
	switch e.Op {
	case hclsyntax.OpLogicalAnd, hclsyntax.OpLogicalOr:
		if !plain(l) || l.Type() != cty.Bool {
			return cty.NilVal, false
		}
		// HCL's result is the left operand's when it decides alone (false &&, true ||), whatever the right is.
		if e.Op == hclsyntax.OpLogicalAnd && l.False() || e.Op == hclsyntax.OpLogicalOr && l.True() {
			return l, true
		}
		r, ok := fastEval(e.RHS, s)
		if !ok || !plain(r) || r.Type() != cty.Bool {
			return cty.NilVal, false
		}
		return r, true
	}
	r, ok := fastEval(e.RHS, s)
	if !ok || !l.IsKnown() || !r.IsKnown() || l.IsMarked() || r.IsMarked() {
		return cty.NilVal, false
	}
	switch e.Op {
	case hclsyntax.OpEqual, hclsyntax.OpNotEqual:
		eq := fastEquals(l, r)
		if e.Op == hclsyntax.OpNotEqual {
			eq = eq.Not()
		}
		return eq, true
	}
	if !plain(l) || !plain(r) || l.Type() != cty.Number || r.Type() != cty.Number {
		return cty.NilVal, false
	}
	switch e.Op {
	case hclsyntax.OpGreaterThan:
		return l.GreaterThan(r), true
	case hclsyntax.OpGreaterThanOrEqual:
		return l.GreaterThanOrEqualTo(r), true
	case hclsyntax.OpLessThan:
		return l.LessThan(r), true
	case hclsyntax.OpLessThanOrEqual:
		return l.LessThanOrEqualTo(r), true
	case hclsyntax.OpAdd:
		return l.Add(r), true
	case hclsyntax.OpSubtract:
		return l.Subtract(r), true
	case hclsyntax.OpMultiply:
		return l.Multiply(r), true
	}
	return cty.NilVal, false // division and modulo have error cases of their own: HCL's
}

// fastEquals is l == r as cty's Equals decides it, with the comparison of two strings (most of a rule's) done
// without its general path.
func fastEquals(l, r cty.Value) cty.Value {
	if l.Type() == cty.String && r.Type() == cty.String && !l.IsNull() && !r.IsNull() {
		return cty.BoolVal(l.AsString() == r.AsString())
	}
	return l.Equals(r)
}

func fastFor(e *hclsyntax.ForExpr, s *scope) (cty.Value, bool) {
	if e.KeyExpr != nil || e.Group {
		return cty.NilVal, false // an object result: HCL's
	}
	var vals []cty.Value
	ok := s.each(e, func(inner *scope) bool {
		if e.CondExpr != nil {
			c, ok := fastEval(e.CondExpr, inner)
			if !ok || !plain(c) || c.Type() != cty.Bool {
				return false
			}
			if c.False() {
				return true
			}
		}
		v, ok := fastEval(e.ValExpr, inner)
		if !ok {
			return false
		}
		vals = append(vals, v)
		return true
	})
	if !ok {
		return cty.NilVal, false
	}
	if len(vals) == 0 {
		return cty.EmptyTupleVal, true
	}
	return cty.TupleVal(vals), true
}

// each calls body for every element of e's collection with e's variables set, until body returns false; false
// when the collection is not one fastEval walks, or body stopped. plan.nodes is walked over the documents of the
// nodes, without their objects.
func (s *scope) each(e *hclsyntax.ForExpr, body func(inner *scope) bool) bool {
	inner := s.push(e.KeyVar, e.ValVar)
	if isNodes(e.CollExpr) {
		if _, _, kind := s.lookup(config.RuleRootPlan); kind == kindPlan {
			for i := range s.env.doc.Nodes {
				inner.node, inner.val = i, cty.NilVal
				if e.KeyVar != "" {
					inner.key = cty.NumberIntVal(int64(i))
				}
				if !body(inner) {
					return false
				}
			}
			return true
		}
	}
	coll, ok := fastEval(e.CollExpr, s)
	if !ok || !plain(coll) || !coll.CanIterateElements() {
		return false
	}
	for it := elements(coll, e.KeyVar != ""); it.next(); {
		inner.set(it.key, it.val)
		if !body(inner) {
			return false
		}
	}
	return true
}

func fastCall(e *hclsyntax.FunctionCallExpr, s *scope) (cty.Value, bool) {
	fn, ok := functions[e.Name]
	if !ok || e.ExpandFinal {
		return cty.NilVal, false
	}
	if e.Name == "can" || e.Name == "try" {
		return cty.NilVal, false // they take expressions, not values: HCL's
	}
	if len(e.Args) == 1 && e.Name == "length" && isNodes(e.Args[0]) {
		if _, _, kind := s.lookup(config.RuleRootPlan); kind == kindPlan {
			return cty.NumberIntVal(int64(len(s.env.doc.Nodes))), true
		}
	}
	if len(e.Args) == 1 && (e.Name == "anytrue" || e.Name == "alltrue" || e.Name == "length") {
		if f, ok := e.Args[0].(*hclsyntax.ForExpr); ok && f.KeyExpr == nil && !f.Group {
			return fastFold(e.Name, f, s)
		}
	}
	args := make([]cty.Value, len(e.Args))
	for i, a := range e.Args {
		v, ok := fastEval(a, s)
		if !ok {
			return cty.NilVal, false
		}
		args[i] = v
	}
	// The folds and length over a for expression's tuple, directly: go-cty's Call walks every argument for marks,
	// which over a tuple of nodes is most of the rule's cost.
	if len(args) == 1 && plain(args[0]) && (args[0].Type().IsTupleType() || args[0].Type().IsListType()) {
		switch e.Name {
		case "length":
			return cty.NumberIntVal(int64(args[0].LengthInt())), true
		case "anytrue", "alltrue":
			want := e.Name == "anytrue"
			found := false
			for it := args[0].ElementIterator(); it.Next(); {
				_, el := it.Element()
				if !plain(el) || el.Type() != cty.Bool {
					return cty.NilVal, false
				}
				found = found || el.True() == want
			}
			return cty.BoolVal(found == want), true
		}
	}
	v, err := callFunction(fn, args)
	if err != nil {
		return cty.NilVal, false
	}
	return v, true
}

// fastFold is anytrue, alltrue or length of a for expression, evaluated element by element without building
// its tuple. Every element is evaluated, as HCL does, so an error in any sends the rule to HCL.
func fastFold(name string, e *hclsyntax.ForExpr, s *scope) (cty.Value, bool) {
	count, trues := 0, 0
	// length() needs no value of a for expression whose value is its variable (n if n.role == "worker").
	bare := false
	if t, ok := e.ValExpr.(*hclsyntax.ScopeTraversalExpr); ok && name == "length" && len(t.Traversal) == 1 && t.Traversal.RootName() == e.ValVar {
		bare = true
	}
	ok := s.each(e, func(inner *scope) bool {
		if e.CondExpr != nil {
			c, ok := fastEval(e.CondExpr, inner)
			if !ok || !plain(c) || c.Type() != cty.Bool {
				return false
			}
			if c.False() {
				return true
			}
		}
		count++
		if bare {
			return true
		}
		v, ok := fastEval(e.ValExpr, inner)
		if !ok {
			return false
		}
		if name == "length" {
			return true
		}
		if !plain(v) || v.Type() != cty.Bool {
			return false
		}
		if v.True() {
			trues++
		}
		return true
	})
	if !ok {
		return cty.NilVal, false
	}
	switch name {
	case "length":
		return cty.NumberIntVal(int64(count)), true
	case "anytrue":
		return cty.BoolVal(trues > 0), true
	}
	return cty.BoolVal(trues == count), true
}

// callFunction calls fn, turning a panic in a function (a bug of go-cty's on a value it did not expect) into an
// error, so that the rule goes to HCL's evaluator, which reports it.
func callFunction(fn function.Function, args []cty.Value) (v cty.Value, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = cty.NilVal, errPanicked
		}
	}()
	return fn.Call(args)
}

var errPanicked = function.NewArgErrorf(0, "the function failed")

// elementIter walks a collection's elements; without keys (a for expression with no key variable) a list or
// tuple is walked as a slice, sparing cty's iterator the number value it makes for every index.
type elementIter struct {
	vals     []cty.Value
	i        int
	it       cty.ElementIterator
	key, val cty.Value
}

func elements(coll cty.Value, keys bool) *elementIter {
	if t := coll.Type(); !keys && (t.IsListType() || t.IsTupleType()) {
		return &elementIter{vals: coll.AsValueSlice(), i: -1}
	}
	return &elementIter{it: coll.ElementIterator()}
}

func (e *elementIter) next() bool {
	if e.it != nil {
		if !e.it.Next() {
			return false
		}
		e.key, e.val = e.it.Element()
		return true
	}
	e.i++
	if e.i >= len(e.vals) {
		return false
	}
	e.key, e.val = cty.NilVal, e.vals[e.i]
	return true
}

// scope is the variables a fast evaluation sees: a for expression's key and value over its parent's, and at the
// root plan and change.
type scope struct {
	parent         *scope
	keyVar, valVar string
	key, val       cty.Value
	// node is plan.nodes' index of the frame's element, and val unused, when the frame walks plan.nodes over
	// the nodes' documents; -1 otherwise.
	node int
	env  *env
}

// What a name is in a scope.
const (
	kindNone  = iota // not in scope
	kindValue        // a value
	kindNode         // a node of plan.nodes, as its document
	kindPlan         // plan, at the root
)

func rootScope(e *env) *scope { return &scope{env: e, node: -1} }

func (s *scope) lookup(name string) (cty.Value, int, int) {
	for c := s; c != nil; c = c.parent {
		if c.parent == nil {
			switch name {
			case config.RuleRootPlan:
				return cty.NilVal, -1, kindPlan
			case config.RuleRootChange:
				return c.env.change, -1, kindValue
			}
			return cty.NilVal, -1, kindNone
		}
		if name == c.valVar {
			if c.node >= 0 {
				return cty.NilVal, c.node, kindNode
			}
			return c.val, -1, kindValue
		}
		if c.keyVar != "" && name == c.keyVar {
			return c.key, -1, kindValue
		}
	}
	return cty.NilVal, -1, kindNone
}

func (s *scope) push(keyVar, valVar string) *scope {
	return &scope{parent: s, keyVar: keyVar, valVar: valVar, env: s.env, node: -1}
}

func (s *scope) set(k, v cty.Value) { s.key, s.val, s.node = k, v, -1 }
