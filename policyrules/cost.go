package policyrules

import (
	"fmt"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/kewplan/kewplan/config"
)

// MaxConditionSteps bounds what one condition may cost: the expression nodes it evaluates, each for
// expression's body counted once per element of its collection. The bound is computed before the condition runs,
// from the sizes of the collections it iterates in this plan, so a rule that would take minutes on a large
// plan from a pull request (a for expression over plan.nodes inside another) is refused at once, as a deny
// finding, rather than run. A for expression over 10,000 nodes with a body of a hundred expressions is within it.
const MaxConditionSteps = 2_000_000

// valueSizes are the collection sizes of the plan and change objects, for bounding a collection the cost check
// cannot evaluate alone.
type valueSizes struct {
	inner int // the longest collection inside an element of a top-level one (a node's credentials, its attributes)
	total int // every element of every collection: a bound on anything built from them (flatten, concat)
}

// lazySizes measures the values the first time a bound needs them: most conditions iterate only traversals of
// plan and change, whose sizes are exact, and never pay for the walk.
type lazySizes struct {
	once sync.Once
	vals []cty.Value
	s    valueSizes
}

func (l *lazySizes) get() valueSizes {
	l.once.Do(func() { l.s = measure(l.vals...) })
	return l.s
}

func measure(vals ...cty.Value) valueSizes {
	var s valueSizes
	var walk func(v cty.Value, depth int)
	walk = func(v cty.Value, depth int) {
		if v.IsNull() || !v.IsKnown() {
			return
		}
		t := v.Type()
		if !t.IsCollectionType() && !t.IsTupleType() && !t.IsObjectType() {
			return
		}
		n := v.LengthInt()
		s.total += n
		if depth >= 2 && n > s.inner {
			s.inner = n
		}
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			walk(e, depth+1)
		}
	}
	for _, v := range vals {
		walk(v, 0)
	}
	s.total = max(s.total, 1)
	s.inner = max(s.inner, 1)
	return s
}

// checkCost returns why the condition costs too much (and where), or "" when it is within MaxConditionSteps.
func checkCost(expr hcl.Expression, e *env) (string, hcl.Range) {
	se, ok := expr.(hclsyntax.Expression)
	if !ok {
		return "The condition is not written in HCL's native syntax; a rule's condition must be, so that its cost can be bounded.", expr.Range()
	}
	w := &costWalker{env: e}
	hclsyntax.Walk(se, w)
	if w.steps <= MaxConditionSteps {
		return "", hcl.Range{}
	}
	return fmt.Sprintf("The condition would evaluate about %.3g expressions on this plan, more than the %d a rule may: a for expression over a large collection (plan.nodes) nests another over a large collection. Iterate the nodes once, and compare what a node holds within its own body.",
		w.steps, MaxConditionSteps), w.worst
}

type costFrame struct {
	node hclsyntax.Node
	mult float64
	// iters are the for expressions' value variables in scope, each with what it iterates.
	iters map[string]iterSource
}

// iterSource is what a for expression's variable iterates: plan.nodes, another collection of plan or change,
// or something the bound does not know (neither set).
type iterSource struct {
	nodes bool
	coll  cty.Value
}

type costWalker struct {
	env    *env
	stack  []costFrame
	steps  float64
	worst  hcl.Range
	worstM float64
}

func (w *costWalker) Enter(n hclsyntax.Node) hcl.Diagnostics {
	f := costFrame{node: n, mult: 1}
	if len(w.stack) > 0 {
		parent := w.stack[len(w.stack)-1]
		f.mult, f.iters = parent.mult, parent.iters
		switch p := parent.node.(type) {
		case *hclsyntax.ForExpr:
			if n != hclsyntax.Node(p.CollExpr) {
				f.mult *= float64(w.bound(p.CollExpr, parent.iters))
				iters := map[string]iterSource{}
				for k, v := range parent.iters {
					iters[k] = v
				}
				iters[p.ValVar] = w.rootValue(p.CollExpr, parent.iters)
				if p.KeyVar != "" {
					iters[p.KeyVar] = iterSource{}
				}
				f.iters = iters
			}
		case *hclsyntax.SplatExpr:
			if n == hclsyntax.Node(p.Each) {
				f.mult *= float64(w.bound(p.Source, parent.iters))
			}
		}
	}
	w.steps += f.mult
	if f.mult > w.worstM {
		w.worstM, w.worst = f.mult, n.Range()
	}
	w.stack = append(w.stack, f)
	return nil
}

func (w *costWalker) Exit(hclsyntax.Node) hcl.Diagnostics {
	w.stack = w.stack[:len(w.stack)-1]
	return nil
}

// bound is how many elements a collection expression may have: exactly, for a traversal of plan or change;
// the longest inner collection, for one of a for expression's variables (n.credentials); otherwise the number of
// all elements.
func (w *costWalker) bound(e hclsyntax.Expression, iters map[string]iterSource) int {
	t, ok := e.(*hclsyntax.ScopeTraversalExpr)
	if !ok {
		return w.env.valueSizes().total
	}
	root := t.Traversal.RootName()
	if src, ok := iters[root]; ok {
		// n.credentials, for n in plan.nodes: the longest credentials list of any node.
		switch {
		case len(t.Traversal) < 2:
			return w.env.valueSizes().inner
		case src.nodes:
			longest := 1
			sc := rootScope(w.env).push("", root)
			for i := range w.env.doc.Nodes {
				sc.node = i
				if v, ok := fastTraversal(t.Traversal, sc); ok {
					longest = max(longest, length(v))
				}
			}
			return longest
		case src.coll != cty.NilVal:
			longest := 1
			for it := src.coll.ElementIterator(); it.Next(); {
				_, el := it.Element()
				if v, diags := t.Traversal[1:].TraverseRel(el); !diags.HasErrors() {
					longest = max(longest, length(v))
				}
			}
			return longest
		}
		return w.env.valueSizes().inner
	}
	if root == config.RuleRootPlan || root == config.RuleRootChange {
		if isNodes(t) {
			return max(len(w.env.doc.Nodes), 1)
		}
		v, ok := w.traversalValue(t)
		if !ok {
			return 1 // it errors when evaluated: nothing is iterated
		}
		return max(length(v), 1)
	}
	return w.env.valueSizes().total
}

// traversalValue is a traversal of plan or change, by the shortcut or else by HCL; false when it errors.
func (w *costWalker) traversalValue(t *hclsyntax.ScopeTraversalExpr) (cty.Value, bool) {
	if v, ok := fastTraversal(t.Traversal, rootScope(w.env)); ok {
		return v, true
	}
	v, diags := t.Value(w.env.hclContext())
	return v, !diags.HasErrors()
}

// rootValue is what a for expression's collection is, for bounding the traversals of its variable.
func (w *costWalker) rootValue(e hclsyntax.Expression, iters map[string]iterSource) iterSource {
	t, ok := e.(*hclsyntax.ScopeTraversalExpr)
	if !ok {
		return iterSource{}
	}
	if _, shadowed := iters[t.Traversal.RootName()]; shadowed {
		return iterSource{}
	}
	if root := t.Traversal.RootName(); root != config.RuleRootPlan && root != config.RuleRootChange {
		return iterSource{}
	}
	if isNodes(t) {
		return iterSource{nodes: true}
	}
	v, ok := w.traversalValue(t)
	if !ok || !v.IsKnown() || v.IsNull() || !v.CanIterateElements() {
		return iterSource{}
	}
	return iterSource{coll: v}
}

// length is how many elements v has, 0 for a null or a value that is no collection.
func length(v cty.Value) int {
	if !v.IsKnown() || v.IsNull() {
		return 0
	}
	if ty := v.Type(); ty.IsCollectionType() || ty.IsTupleType() || ty.IsObjectType() {
		return v.LengthInt()
	}
	return 0
}
