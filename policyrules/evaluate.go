package policyrules

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/internal/parallel"
	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/plandiff"
)

// IDPrefix begins the id of every rule's finding: rule "opus-fan-out" raises policy-rule-opus-fan-out.
const IDPrefix = "policy-rule-"

// ID is the finding id of the rule named name.
func ID(name string) string { return IDPrefix + name }

// MaxFindingNodes bounds the nodes one finding names: past it the finding says how many more matched.
const MaxFindingNodes = 100

// Input is what the rules judge: the plan document and, when a base plan was given, the change against it
// (nil: `change` is null).
type Input struct {
	Plan   *jsonplan.Document
	Change *plandiff.Diff
}

// Finding is one rule that matched, or one rule whose condition could not be judged (Failed: a deny).
type Finding struct {
	Rule  *config.PolicyRule
	Level string // config.RuleLevelDeny, RuleLevelWarn or RuleLevelReview
	// Failed is set when the condition errored, was not a bool or cost too much; Problem says why and Subject
	// is the most specific range of the problem.
	Failed  bool
	Problem string
	Subject hcl.Range
	// Nodes are the nodes the rule names through a for expression over plan.nodes or change.widenings, at most
	// MaxFindingNodes; More counts those left out.
	Nodes []jsonplan.PolicyFindingNode
	More  int
}

// ID is the finding's id.
func (f *Finding) ID() string { return ID(f.Rule.Name) }

// Result is the outcome of every rule, in rule order.
type Result struct {
	Findings  []Finding
	Evaluated int // rules evaluated
}

// Matched returns the names of the rules that matched at level (a failed rule counts as deny), in rule order.
func (r *Result) Matched(level string) []string {
	var out []string
	if r == nil {
		return out
	}
	for _, f := range r.Findings {
		if f.Level == level {
			out = append(out, f.Rule.Name)
		}
	}
	return out
}

// Denied reports whether a deny rule matched or a rule could not be judged.
func (r *Result) Denied() bool { return len(r.Matched(config.RuleLevelDeny)) > 0 }

// NeedsReview reports whether a review rule matched.
func (r *Result) NeedsReview() bool { return len(r.Matched(config.RuleLevelReview)) > 0 }

// Rules are the rules of the policies that apply, in order: the configuration's policy block, then the
// organisation's policy file. nil policies are skipped.
func Rules(policies ...*config.Policy) []*config.PolicyRule {
	var out []*config.PolicyRule
	for _, p := range policies {
		if p != nil {
			out = append(out, p.Rules...)
		}
	}
	return out
}

// Evaluate judges every rule against in. Without rules it builds nothing and returns an empty result, so a plan
// without rules pays nothing for them.
func Evaluate(rules []*config.PolicyRule, in Input) *Result {
	res := &Result{}
	if len(rules) == 0 || in.Plan == nil {
		return res
	}
	e := newEnv(rules, in)
	// Rules are independent and the context is only read: they are judged side by side, kept in rule order.
	found := make([]Finding, len(rules))
	hit := make([]bool, len(rules))
	parallel.For(len(rules), func(i int) { found[i], hit[i] = evaluateRule(rules[i], e, in) })
	res.Evaluated = len(rules)
	for i := range rules {
		if hit[i] {
			res.Findings = append(res.Findings, found[i])
		}
	}
	return res
}

func evaluateRule(r *config.PolicyRule, e *env, in Input) (Finding, bool) {
	failed := func(problem string, subject hcl.Range) (Finding, bool) {
		return Finding{Rule: r, Level: config.RuleLevelDeny, Failed: true, Problem: problem, Subject: subject}, true
	}
	if r.Condition == nil {
		return failed("The rule has no condition.", r.DeclRange)
	}
	if msg, subject := checkCost(r.Condition, e); msg != "" {
		return failed(msg, subject)
	}
	matched := func() (Finding, bool) {
		f := Finding{Rule: r, Level: r.Level, Subject: r.ConditionRange}
		f.Nodes, f.More = attribute(r.Condition, e)
		return f, true
	}
	if se, ok := r.Condition.(hclsyntax.Expression); ok {
		if v, ok := fastEval(se, rootScope(e)); ok && plain(v) && v.Type() == cty.Bool {
			if v.False() {
				return Finding{}, false
			}
			return matched()
		}
	}
	v, diags := r.Condition.Value(e.hclContext())
	if diags.HasErrors() {
		return failed(describeError(diags, in.Change == nil, r), errorSubject(diags, r.ConditionRange))
	}
	switch {
	case !v.IsKnown() || v.IsNull():
		return failed("The condition is null; it must be true or false.", r.ConditionRange)
	case !v.Type().Equals(cty.Bool):
		return failed(fmt.Sprintf("The condition is %s; it must be true or false. Wrap a list of checks in anytrue() or alltrue().", v.Type().FriendlyName()), r.ConditionRange)
	case v.False():
		return Finding{}, false
	}
	return matched()
}

// describeError words the condition's first error; a condition over change without a base gets the hint that
// change is null then.
func describeError(diags hcl.Diagnostics, noBase bool, r *config.PolicyRule) string {
	var d *hcl.Diagnostic
	for _, x := range diags {
		if x.Severity == hcl.DiagError {
			d = x
			break
		}
	}
	msg := strings.TrimSuffix(d.Summary, ".") + "."
	if d.Detail != "" {
		msg += " " + d.Detail
	}
	if strings.Contains(d.Summary, "function") {
		msg += " A rule may call only " + strings.Join(FunctionNames(), ", ") + ": nothing that reads a file, the environment or the clock."
	}
	if noBase && refersTo(r.Condition, config.RuleRootChange) {
		msg += " change is null when no base plan is given (plan --base BASEPLAN, diff, apply --base): write change != null && ... to judge a change only when there is one."
	}
	return msg
}

func refersTo(expr hcl.Expression, root string) bool {
	for _, t := range expr.Variables() {
		if t.RootName() == root {
			return true
		}
	}
	return false
}

func errorSubject(diags hcl.Diagnostics, fallback hcl.Range) hcl.Range {
	for _, d := range diags {
		if d.Severity == hcl.DiagError && d.Subject != nil && d.Subject.Filename == fallback.Filename &&
			d.Subject.Start.Byte >= fallback.Start.Byte && d.Subject.End.Byte <= fallback.End.Byte {
			return *d.Subject
		}
	}
	return fallback
}

// Diagnostics are the findings as diagnostics for the views: deny (and a rule that could not be judged) an
// error, warn and review warnings, each with the rule's id and its condition as subject.
func (r *Result) Diagnostics() hcl.Diagnostics {
	if r == nil {
		return nil
	}
	out := make(hcl.Diagnostics, 0, len(r.Findings))
	for i := range r.Findings {
		out = append(out, r.Findings[i].Diagnostic())
	}
	return out
}

// Diagnostic is the finding as a diagnostic.
func (f *Finding) Diagnostic() *hcl.Diagnostic {
	name := f.Rule.Name
	d := &hcl.Diagnostic{Severity: hcl.DiagWarning, Subject: f.Subject.Ptr()}
	var detail strings.Builder
	switch {
	case f.Failed:
		d.Severity = hcl.DiagError
		d.Summary = fmt.Sprintf("Policy rule %q cannot be judged", name)
		detail.WriteString(f.Problem)
		detail.WriteString(" A rule whose condition cannot be judged refuses the plan; fix the condition (kewplan policy test runs the policy's own tests).")
	case f.Level == config.RuleLevelDeny:
		d.Severity = hcl.DiagError
		d.Summary = fmt.Sprintf("Policy rule %q denies the plan", name)
		detail.WriteString(f.Rule.Message)
	case f.Level == config.RuleLevelReview:
		d.Summary = fmt.Sprintf("Policy rule %q needs review", name)
		detail.WriteString(f.Rule.Message)
	default:
		d.Summary = fmt.Sprintf("Policy rule %q warns", name)
		detail.WriteString(f.Rule.Message)
	}
	if len(f.Nodes) > 0 {
		names := make([]string, len(f.Nodes))
		for i, n := range f.Nodes {
			names[i] = nodeLabel(n.Name)
		}
		fmt.Fprintf(&detail, " Nodes: %s", strings.Join(names, ", "))
		if f.More > 0 {
			fmt.Fprintf(&detail, " and %d more", f.More)
		}
		detail.WriteString(".")
	}
	if f.Level == config.RuleLevelReview && !f.Failed {
		detail.WriteString(" The plan needs the signatures of the policy's approvals block (when = \"review\") before apply runs it.")
	}
	d.Detail = detail.String()
	nodes := f.Nodes
	if nodes == nil {
		nodes = []jsonplan.PolicyFindingNode{}
	}
	d.Extra = findingRef{id: f.ID(), finding: &jsonplan.PolicyFinding{Rule: name, Level: f.Level, Message: f.Rule.Message, Nodes: nodes}}
	return d
}

// findingRef is the Extra of a finding's diagnostic: its id for the views (RuleID), and its level and nodes for
// the plan document (PolicyFinding).
type findingRef struct {
	id      string
	finding *jsonplan.PolicyFinding
}

func (r findingRef) RuleID() string                         { return r.id }
func (r findingRef) PolicyFinding() *jsonplan.PolicyFinding { return r.finding }
