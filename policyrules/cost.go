package policyrules

import (
	"fmt"

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
func checkCost(expr hcl.Expression, ctx *hcl.EvalContext, sizes valueSizes) (string, hcl.Range) {
	se, ok := expr.(hclsyntax.Expression)
	if !ok {
		return "The condition is not written in HCL's native syntax; a rule's condition must be, so that its cost can be bounded.", expr.Range()
	}
	w := &costWalker{ctx: ctx, sizes: sizes}
	hclsyntax.Walk(se, w)
	if w.steps <= MaxConditionSteps {
		return "", hcl.Range{}
	}
	return fmt.Sprintf("The condition would evaluate about %.3g expressions on this plan, more than the %d a rule may: a for expression over a large collection (plan.nodes) nests another over a large collection. Iterate the nodes once, and compare what a node holds within its own body.",
		w.steps, MaxConditionSteps), w.worst
}

type costFrame struct {
	node  hclsyntax.Node
	mult  float64
	iters map[string]bool // the for expressions' variables in scope
}

type costWalker struct {
	ctx    *hcl.EvalContext
	sizes  valueSizes
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
				iters := map[string]bool{p.ValVar: true}
				if p.KeyVar != "" {
					iters[p.KeyVar] = true
				}
				for k := range parent.iters {
					iters[k] = true
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
func (w *costWalker) bound(e hclsyntax.Expression, iters map[string]bool) int {
	t, ok := e.(*hclsyntax.ScopeTraversalExpr)
	if !ok {
		return w.sizes.total
	}
	root := t.Traversal.RootName()
	switch {
	case iters[root]:
		return w.sizes.inner
	case root == config.RuleRootPlan || root == config.RuleRootChange:
		v, diags := t.Value(w.ctx)
		if diags.HasErrors() || v.IsNull() || !v.IsKnown() {
			return 1 // it errors or is null when evaluated: nothing is iterated
		}
		if ty := v.Type(); ty.IsCollectionType() || ty.IsTupleType() || ty.IsObjectType() {
			return max(v.LengthInt(), 1)
		}
		return 1
	}
	return w.sizes.total
}
