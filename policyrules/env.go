package policyrules

import (
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/internal/parallel"
	"github.com/kewplan/kewplan/jsonplan"
)

// env is what every rule of one evaluation shares: the plan document, plan's fields but its nodes, change, and,
// built the first time a rule needs them (HCL's evaluator, a node seen whole, a bound over every value), the
// cty objects of the nodes and HCL's context. The fast path reads a node's attributes from its document
// directly, so a plan whose rules it answers never builds 10,000 node objects.
type env struct {
	doc       *jsonplan.Document
	instances map[string]int
	head      cty.Value // plan without nodes
	change    cty.Value
	attrs     map[string]bool // the projection of the node objects (nil: whole)

	// values are each node's attributes, in the order of names (the projection, or all), made once for every
	// rule the first time one reads a node.
	valuesOnce sync.Once
	names      map[string]int
	values     [][]cty.Value

	once  sync.Once
	plan  cty.Value
	ctx   *hcl.EvalContext
	sizes *lazySizes
}

func newEnv(rules []*config.PolicyRule, in Input) *env {
	e := &env{doc: in.Plan, instances: blockInstances(in.Plan), change: ChangeObject(in.Change, in.Plan), attrs: projection(rules)}
	e.head = cty.ObjectVal(planFields(in.Plan, e.instances))
	return e
}

func (e *env) build() {
	e.once.Do(func() {
		fields := planFields(e.doc, e.instances)
		fields["nodes"] = nodesTuple(e.doc, e.instances, e.attrs)
		e.plan = cty.ObjectVal(fields)
		e.ctx = &hcl.EvalContext{
			Variables: map[string]cty.Value{config.RuleRootPlan: e.plan, config.RuleRootChange: e.change},
			Functions: functions,
		}
		e.sizes = &lazySizes{vals: []cty.Value{e.plan, e.change}}
	})
}

// nodeAttribute is attribute name of plan.nodes[i], as its object holds it; false for a name it has not.
func (e *env) nodeAttribute(i int, name string) (cty.Value, bool) {
	e.valuesOnce.Do(func() {
		e.names = map[string]int{}
		var makers []func(*jsonplan.NodeDocument, map[string]int) cty.Value
		for _, a := range nodeAttributes {
			if e.attrs == nil || e.attrs[a.name] {
				e.names[a.name] = len(makers)
				makers = append(makers, a.value)
			}
		}
		e.values = make([][]cty.Value, len(e.doc.Nodes))
		parallel.For(len(e.doc.Nodes), func(n int) {
			vals := make([]cty.Value, len(makers))
			for j, m := range makers {
				vals[j] = m(&e.doc.Nodes[n], e.instances)
			}
			e.values[n] = vals
		})
	})
	j, ok := e.names[name]
	if !ok {
		return cty.NilVal, false
	}
	return e.values[i][j], true
}

// fullPlan is plan with its nodes.
func (e *env) fullPlan() cty.Value { e.build(); return e.plan }

// hclContext is HCL's evaluation context over plan and change.
func (e *env) hclContext() *hcl.EvalContext { e.build(); return e.ctx }

// node is plan.nodes[i] as a cty object.
func (e *env) node(i int) cty.Value {
	return e.fullPlan().GetAttr("nodes").Index(cty.NumberIntVal(int64(i)))
}

// valueSizes are the collection sizes of plan and change, for a bound the cost check cannot compute alone.
func (e *env) valueSizes() valueSizes { e.build(); return e.sizes.get() }
