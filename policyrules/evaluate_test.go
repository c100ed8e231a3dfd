package policyrules

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/plandiff"
)

func parseRules(t *testing.T, src string) []*config.PolicyRule {
	t.Helper()
	p, diags := config.ParsePolicy([]byte(src), "policy.hcl")
	if diags.HasErrors() {
		t.Fatalf("ParsePolicy: %s", diags.Error())
	}
	return p.Rules
}

func fanOut(model string, n int) *jsonplan.Document {
	doc := &jsonplan.Document{FormatVersion: jsonplan.FormatVersion}
	for i := range n {
		doc.Nodes = append(doc.Nodes, jsonplan.NodeDocument{
			Name: fmt.Sprintf("fix[%d]", i), Runner: "claude-code", Model: model, Network: "allowlist", Role: "worker",
			Credentials: []string{"ANTHROPIC_API_KEY"}, CredentialMode: "brokered",
			Push:     &jsonplan.PushDocument{Branch: fmt.Sprintf("kew/fix-%d", i)},
			Instance: &jsonplan.InstanceDoc{Node: "fix", Key: int64(i)},
			Range:    &jsonplan.Range{Filename: "main.hcl", Start: jsonplan.Pos{Line: 3, Column: 1}, End: jsonplan.Pos{Line: 3, Column: 11}},
		})
	}
	return doc
}

const threeRules = `
policy {
  rule "opus-fan-out" {
    level     = "deny"
    condition = anytrue([for n in plan.nodes : n.model == "claude-opus-4-1" && n.instances > 10])
    message   = "Opus on a fan-out of more than 10 instances."
  }
  rule "push-outside-kew" {
    level     = "review"
    condition = anytrue([for n in plan.nodes : n.push != null && !startswith(n.push.branch, "kew/")])
    message   = "A worker pushes outside kew/**."
  }
  rule "many-nodes" {
    level     = "warn"
    condition = plan.totals.nodes > 5
    message   = "A large plan."
  }
}
`

func matched(r *Result) map[string][]string {
	return map[string][]string{
		"deny": r.Matched(config.RuleLevelDeny), "review": r.Matched(config.RuleLevelReview), "warn": r.Matched(config.RuleLevelWarn),
	}
}

func TestEvaluateOutcomes(t *testing.T) {
	rules := parseRules(t, threeRules)
	outside := fanOut("claude-sonnet-4", 2)
	outside.Nodes[1].Push.Branch = "main"
	tests := []struct {
		name string
		doc  *jsonplan.Document
		want map[string][]string
	}{
		{"nothing", fanOut("claude-opus-4-1", 3), map[string][]string{}},
		{"deny and warn", fanOut("claude-opus-4-1", 11), map[string][]string{"deny": {"opus-fan-out"}, "warn": {"many-nodes"}}},
		{"review", outside, map[string][]string{"review": {"push-outside-kew"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := matched(Evaluate(rules, Input{Plan: tt.doc}))
			for _, l := range []string{"deny", "review", "warn"} {
				if diff := cmp.Diff(tt.want[l], got[l]); diff != "" {
					t.Errorf("Evaluate() %s mismatch (-want +got):\n%s", l, diff)
				}
			}
		})
	}
}

func TestFindingDiagnostic(t *testing.T) {
	rules := parseRules(t, threeRules)
	doc := fanOut("claude-sonnet-4", 2)
	doc.Nodes[1].Push.Branch = "main"
	r := Evaluate(rules, Input{Plan: doc})
	diags := r.Diagnostics()
	if len(diags) != 1 {
		t.Fatalf("Diagnostics() = %d, want 1: %s", len(diags), diags.Error())
	}
	d := diags[0]
	if d.Severity != hcl.DiagWarning || d.Summary != `Policy rule "push-outside-kew" needs review` {
		t.Errorf("diagnostic = %v %q", d.Severity, d.Summary)
	}
	if !strings.Contains(d.Detail, `Nodes: "fix[1]".`) {
		t.Errorf("detail does not name the node: %q", d.Detail)
	}
	if d.Subject == nil || d.Subject.Filename != "policy.hcl" || d.Subject.Start.Line != 10 {
		t.Errorf("subject = %v, want the condition at policy.hcl:10", d.Subject)
	}
	jd := jsonplan.NewDiagnostic(d, nil)
	want := &jsonplan.PolicyFinding{Rule: "push-outside-kew", Level: "review", Message: "A worker pushes outside kew/**.", Nodes: []jsonplan.PolicyFindingNode{{Name: "fix[1]", Range: doc.Nodes[1].Range}}}
	if jd.Rule != "policy-rule-push-outside-kew" {
		t.Errorf("rule = %q", jd.Rule)
	}
	if diff := cmp.Diff(want, jd.Policy); diff != "" {
		t.Errorf("policy finding mismatch (-want +got):\n%s", diff)
	}
}

func TestEvaluateFailures(t *testing.T) {
	tests := []struct {
		name, condition, problem string
		line                     int
	}{
		{"error", `plan.nodes[0].nonexistent == "x"`, "Unsupported attribute", 4},
		{"not a bool", `length(plan.nodes)`, "The condition is number", 4},
		{"string is not a bool", `"true"`, "The condition is string", 4},
		{"null", `null`, "The condition is null", 4},
		{"file is not a function", `file("/etc/passwd") == ""`, "may call only", 4},
		{"env is not a function", `env("HOME") == ""`, "may call only", 4},
		{"change without a base", `anytrue([for w in change.widenings : w.rule == "widening-credential"])`, "change is null when no base plan is given", 4},
	}
	doc := fanOut("m", 20)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules := parseRules(t, fmt.Sprintf("policy {\n  rule \"r\" {\n    level     = \"warn\"\n    condition = %s\n    message   = \"m\"\n  }\n}\n", tt.condition))
			r := Evaluate(rules, Input{Plan: doc})
			if len(r.Findings) != 1 {
				t.Fatalf("Evaluate() = %d findings, want 1", len(r.Findings))
			}
			f := r.Findings[0]
			if !f.Failed || f.Level != config.RuleLevelDeny {
				t.Errorf("finding failed=%v level=%q, want a failed deny", f.Failed, f.Level)
			}
			if !strings.Contains(f.Problem, tt.problem) {
				t.Errorf("problem %q does not say %q", f.Problem, tt.problem)
			}
			if f.Subject.Start.Line != tt.line {
				t.Errorf("subject line = %d, want %d", f.Subject.Start.Line, tt.line)
			}
			if d := f.Diagnostic(); d.Severity != hcl.DiagError {
				t.Errorf("diagnostic severity = %v, want error", d.Severity)
			}
		})
	}
}

func TestEvaluateChange(t *testing.T) {
	rules := parseRules(t, `
policy {
  rule "new-open-credential" {
    level     = "deny"
    condition = change != null && anytrue([for w in change.widenings : w.rule == "widening-credential" && w.network == "open"])
    message   = "A credential was added to an open-network node."
  }
}
`)
	base := fanOut("m", 1)
	base.Nodes[0].Credentials, base.Nodes[0].CredentialMode, base.Nodes[0].Network = []string{}, "", "open"
	head := fanOut("m", 1)
	head.Nodes[0].Network = "open"
	head.Nodes[0].CredentialMode = "forward"
	if r := Evaluate(rules, Input{Plan: head}); len(r.Findings) != 0 {
		t.Errorf("without a base: %d findings, want none (change is null)", len(r.Findings))
	}
	d := plandiff.Compare("base", base, "head", head)
	r := Evaluate(rules, Input{Plan: head, Change: d})
	if diff := cmp.Diff([]string{"new-open-credential"}, r.Matched(config.RuleLevelDeny)); diff != "" {
		t.Fatalf("deny mismatch (-want +got):\n%s", diff)
	}
	if got := r.Findings[0].Nodes; len(got) != 1 || got[0].Name != "fix[0]" {
		t.Errorf("nodes = %v, want fix[0]", got)
	}
}

// TestEvaluateLargePlan checks the bound on a 10,000-node plan: rules that iterate the nodes once are judged (and
// a finding names at most MaxFindingNodes nodes), and a rule nesting a for expression over the nodes in another is
// refused before it runs, as a deny at the inner for expression.
func TestEvaluateLargePlan(t *testing.T) {
	rules := parseRules(t, `
policy {
  rule "once" {
    level     = "warn"
    condition = anytrue([for n in plan.nodes : n.model == "m" && length(n.credentials) > 0 && startswith(n.push.branch, "kew/")])
    message   = "m"
  }
  rule "inner-is-small" {
    level     = "warn"
    condition = anytrue(flatten([for n in plan.nodes : [for c in n.credentials : c == "ANTHROPIC_API_KEY"]]))
    message   = "m"
  }
  rule "quadratic" {
    level     = "warn"
    condition = anytrue(flatten([for a in plan.nodes : [for b in plan.nodes : a.name == b.image]]))
    message   = "m"
  }
}
`)
	doc := fanOut("m", 10_000)
	// One node depends on all the others: a long list inside a node does not bound n.credentials.
	for _, n := range doc.Nodes[1:] {
		doc.Nodes[0].DependsOn = append(doc.Nodes[0].DependsOn, n.Name)
	}
	r := Evaluate(rules, Input{Plan: doc})
	if len(r.Findings) != 3 {
		t.Fatalf("Evaluate() = %d findings, want 3", len(r.Findings))
	}
	for _, f := range r.Findings[:2] {
		if f.Failed {
			t.Fatalf("rule %s failed: %s", f.Rule.Name, f.Problem)
		}
		if len(f.Nodes) != MaxFindingNodes || f.More != 10_000-MaxFindingNodes {
			t.Fatalf("rule %s names %d nodes and %d more, want %d and %d", f.Rule.Name, len(f.Nodes), f.More, MaxFindingNodes, 10_000-MaxFindingNodes)
		}
	}
	q := r.Findings[2]
	if !q.Failed || q.Level != config.RuleLevelDeny || !strings.Contains(q.Problem, "more than the") {
		t.Fatalf("quadratic rule: failed=%v level=%q problem=%q, want refused as too costly", q.Failed, q.Level, q.Problem)
	}
	if q.Subject.Start.Line != 15 {
		t.Errorf("quadratic rule's subject is at line %d, want 15 (its inner for expression)", q.Subject.Start.Line)
	}
}

func TestEvaluateNoRules(t *testing.T) {
	doc := fanOut("m", 100)
	allocs := testing.AllocsPerRun(10, func() { Evaluate(nil, Input{Plan: doc}) })
	if allocs > 1 {
		t.Errorf("Evaluate without rules allocates %v times, want at most 1", allocs)
	}
}

func BenchmarkEvaluate(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("policy {\n")
	for i := range 20 {
		fmt.Fprintf(&sb, "  rule \"r%d\" {\n    level = \"warn\"\n    condition = anytrue([for n in plan.nodes : n.model == \"opus\" && n.instances > 10])\n    message = \"m\"\n  }\n", i)
	}
	sb.WriteString("}\n")
	p, diags := config.ParsePolicy([]byte(sb.String()), "policy.hcl")
	if diags.HasErrors() {
		b.Fatal(diags.Error())
	}
	doc := fanOut("m", 10_000)
	b.ResetTimer()
	for b.Loop() {
		Evaluate(p.Rules, Input{Plan: doc})
	}
}
