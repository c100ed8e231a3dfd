package policyrules

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// TestFastEvalAgreesWithHCL checks the shortcut against HCL's evaluator: wherever fastEval answers, its value is
// HCL's; where HCL errors, fastEval declines (so the rule's finding carries HCL's diagnostic).
func TestFastEvalAgreesWithHCL(t *testing.T) {
	doc := fanOut("claude-opus-4-1", 3)
	doc.Nodes[1].Push = nil
	doc.Nodes[2].Network = "open"
	plan := PlanObject(doc)
	e := newEnv(nil, Input{Plan: doc})
	e.attrs = nil // the whole nodes, as ctx has them
	ctx := &hcl.EvalContext{Variables: map[string]cty.Value{"plan": plan, "change": cty.NullVal(cty.DynamicPseudoType)}, Functions: functions}
	exprs := []string{
		`anytrue([for n in plan.nodes : n.model == "claude-opus-4-1" && n.instances > 2])`,
		`alltrue([for n in plan.nodes : n.network == "allowlist"])`,
		`anytrue([])`, `alltrue([])`,
		`length([for n in plan.nodes : n if n.push != null]) == 2`,
		`anytrue([for n in plan.nodes : n.push != null && !startswith(n.push.branch, "kew/")])`,
		`anytrue([for n in plan.nodes : n.push.branch == "x"])`, // null push: HCL errors
		`anytrue([for n in plan.nodes : n.nope])`,
		`plan.totals.nodes > 2 || plan.nodes[9].name == "x"`,
		`plan.totals.nodes < 2 && plan.nodes[9].name == "x"`,
		`plan.totals.nodes >= 3 && plan.totals.nodes <= 3`,
		`plan.totals.nodes + 1 - 2 * 2 == 0`,
		`-plan.totals.nodes == -3`,
		`plan.totals.nodes > "2"`, // HCL converts the string
		`"true" && true`,
		`plan.budget == null`,
		`change == null`,
		`contains(["a", "claude-opus-4-1"], plan.nodes[0].model)`,
		`plan.totals.nodes > 2 ? "many" : "few"`,
		`plan.totals.nodes > 2 ? 1 : "few"`,
		`length(plan.nodes)`,
		`length(plan.nodes[0].credentials) == 1`,
		`flatten([for n in plan.nodes : [for c in n.credentials : c]])`,
		`anytrue(flatten([for n in plan.nodes : [for c in n.credentials : c == "ANTHROPIC_API_KEY"]]))`,
		`anytrue([for n in plan.nodes : "x"])`,
		`anytrue("no")`,
		`"${plan.totals.nodes} nodes"`,
		`(plan.totals.nodes) == 3`,
		`plan.totals.nodes / 0`,
		`lower(plan.nodes[0].model) == plan.nodes[0].model`,
		`1 == 1.0`,
		`[1] == [1]`,
		`[for i, n in plan.nodes : i]`,
		`[for i, n in plan.nodes : n.name if i > 0]`,
		`length([for n in plan.nodes : n if n.role == "worker"])`,
		`[for n in plan.nodes : n]`,
		`anytrue([for n in plan.nodes : n.push == null])`,
		`anytrue([for n in plan.nodes : n.budget.max_usd > 1])`,
		`length(plan.nodes)`,
		`plan.nodes[0].model`,
		`plan.nodes[0]`,
		`[for n in plan.nodes : n.instance]`,
		`[for plan in plan.nodes : plan.model]`,
		`anytrue([for n in plan.nodes : anytrue([for c in n.credentials : c == "ANTHROPIC_API_KEY"])])`,
		`alltrue([for n in plan.nodes : n.egress_hosts == []])`,
		`[for n in plan.nodes : n.key]`,
		`[for n in plan.nodes : n.push.branch if n.push != null]`,
	}
	for _, src := range exprs {
		expr, diags := hclsyntax.ParseExpression([]byte(src), "t.hcl", hcl.InitialPos)
		if diags.HasErrors() {
			t.Fatalf("%s: %s", src, diags.Error())
		}
		want, wantDiags := expr.Value(ctx)
		got, ok := fastEval(expr, rootScope(e))
		switch {
		case !ok:
			continue
		case wantDiags.HasErrors():
			t.Errorf("%s: fastEval = %#v, and HCL errors: %s", src, got, wantDiags.Error())
		case !got.RawEquals(want):
			t.Errorf("%s: fastEval = %#v, HCL = %#v", src, got, want)
		}
	}
	// The common shapes are answered by the shortcut.
	for _, src := range exprs[:6] {
		expr, _ := hclsyntax.ParseExpression([]byte(src), "t.hcl", hcl.InitialPos)
		if _, ok := fastEval(expr, rootScope(e)); !ok {
			t.Errorf("%s: fastEval declined", src)
		}
	}
}

func TestProjection(t *testing.T) {
	tests := []struct {
		condition string
		want      []string // nil: the nodes are built whole
	}{
		{`anytrue([for n in plan.nodes : n.model == "x" && n.push.branch == "y"])`, []string{"model", "name", "push"}},
		{`length(plan.nodes) > 3 && plan.totals.nodes > 1`, []string{"name"}},
		{`anytrue(flatten([for n in plan.nodes : [for c in n.credentials : c == "X"]]))`, []string{"credentials", "name"}},
		{`change != null && anytrue([for w in change.widenings : w.network == "open"])`, []string{"name"}},
		{`anytrue([for n in plan.nodes : length(keys(n)) > 3])`, nil},
		{`anytrue([for n in plan.nodes : "${n}" == ""])`, nil},
		{`plan.nodes[0].model == "x"`, nil},
		{`length(plan.nodes[*].model) > 0`, nil},
		{`length(concat(plan.nodes, [])) > 0`, nil},
		{`length(keys(plan)) > 0`, nil},
		{`length([for n in plan.nodes : n if n.role == "worker"]) > 3`, []string{"name", "role"}},
		{`length(distinct([for n in plan.nodes : n])) > 3`, nil},
	}
	for _, tt := range tests {
		rules := parseRules(t, "policy {\n  rule \"r\" {\n    level = \"warn\"\n    condition = "+tt.condition+"\n    message = \"m\"\n  }\n}\n")
		got := projection(rules)
		if tt.want == nil {
			if got != nil {
				t.Errorf("%s: projection = %v, want whole nodes", tt.condition, got)
			}
			continue
		}
		var names []string
		for k := range got {
			names = append(names, k)
		}
		slices.Sort(names)
		if diff := cmp.Diff(tt.want, names); diff != "" {
			t.Errorf("%s: projection mismatch (-want +got):\n%s", tt.condition, diff)
		}
	}
}
