package config

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// The levels of a policy rule: what a match does to the plan.
const (
	RuleLevelDeny   = "deny"   // an error: plan exits 1 and apply refuses
	RuleLevelWarn   = "warn"   // a warning
	RuleLevelReview = "review" // the plan needs the approvals block's signatures (when = "review")
)

// RuleLevels are the levels a rule may have, in the order views list them.
var RuleLevels = []string{RuleLevelDeny, RuleLevelReview, RuleLevelWarn}

// The roots a rule's condition may refer to: the plan and its change against a base plan.
const (
	RuleRootPlan   = "plan"
	RuleRootChange = "change"
)

// MaxPolicyRules bounds the rules of one policy block: an organisation's rules are tens, not thousands.
const MaxPolicyRules = 200

// PolicyRule is a `rule "NAME"` block of a policy: a condition over the plan (and its change) that, when true,
// denies the plan, warns, or makes it need review. config only parses it; package policyrules evaluates the
// condition against the plan document.
type PolicyRule struct {
	Name      string
	NameRange hcl.Range
	Level     string // RuleLevelDeny, RuleLevelWarn or RuleLevelReview
	// Condition is the expression as written; it may refer to plan and change, and call the rule functions.
	Condition      hcl.Expression
	ConditionRange hcl.Range
	Message        string
	DeclRange      hcl.Range
}

var policyRuleName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

var policyRuleSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "level", Required: true},
		{Name: "condition", Required: true},
		{Name: "message", Required: true},
	},
}

// decodePolicyRules decodes the rule blocks of a policy block, in source order.
func decodePolicyRules(blocks hcl.Blocks, diags *hcl.Diagnostics) []*PolicyRule {
	var out []*PolicyRule
	seen := map[string]*PolicyRule{}
	for _, b := range blocks {
		if b.Type != "rule" {
			continue
		}
		if len(out) == MaxPolicyRules {
			*diags = append(*diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Too many policy rules",
				Detail: fmt.Sprintf("A policy holds at most %d rules. Merge rules that say the same thing, or keep "+
					"them in fewer, broader conditions.", MaxPolicyRules),
				Subject: b.DefRange.Ptr(),
			})
			break
		}
		r := decodePolicyRule(b, diags)
		if r == nil {
			continue
		}
		if prev, dup := seen[r.Name]; dup {
			*diags = append(*diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Duplicate policy rule",
				Detail: fmt.Sprintf("A rule named %q was already written at %s. A rule's name is its finding's id "+
					"(policy-rule-%s): give each rule its own name.", r.Name, rangeString(prev.DeclRange), r.Name),
				Subject: r.NameRange.Ptr(),
			})
			continue
		}
		seen[r.Name] = r
		out = append(out, r)
	}
	return out
}

func decodePolicyRule(block *hcl.Block, diags *hcl.Diagnostics) *PolicyRule {
	r := &PolicyRule{Name: block.Labels[0], NameRange: block.LabelRanges[0], DeclRange: block.DefRange}
	ok := true
	if !policyRuleName.MatchString(r.Name) {
		*diags = append(*diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid policy rule name",
			Detail: fmt.Sprintf("The rule name %q cannot be used. A rule's name becomes its finding's id "+
				"(policy-rule-NAME): lowercase letters, digits, '-' and '_', starting with a letter or digit, at "+
				"most 63 characters, such as \"opus-fan-out\".", printable(r.Name)),
			Subject: r.NameRange.Ptr(),
		})
		ok = false
	}
	content, moreDiags := bodyContent(block.Body, policyRuleSchema, "a policy rule block")
	*diags = append(*diags, moreDiags...)
	if moreDiags.HasErrors() {
		ok = false
	}
	if attr, found := content.Attributes["level"]; found {
		if v, lit := policyLiteral(attr, cty.String, diags); !lit {
			ok = false
		} else if l := v.AsString(); l == RuleLevelDeny || l == RuleLevelWarn || l == RuleLevelReview {
			r.Level = l
		} else {
			*diags = append(*diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid policy rule level",
				Detail: fmt.Sprintf("level is %q (the plan is refused), %q (a warning) or %q (the plan needs the "+
					"approvals block's signatures); %q is none of them.%s", RuleLevelDeny, RuleLevelWarn,
					RuleLevelReview, printable(l), didYouMean(l, RuleLevels)),
				Subject: attr.Expr.Range().Ptr(),
			})
			ok = false
		}
	}
	if attr, found := content.Attributes["message"]; found {
		if v, lit := policyLiteral(attr, cty.String, diags); !lit {
			ok = false
		} else if strings.TrimSpace(v.AsString()) == "" {
			*diags = append(*diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Empty policy rule message",
				Detail:   "message is what people read when the rule matches: say what is wrong and what to do instead.",
				Subject:  attr.Expr.Range().Ptr(),
			})
			ok = false
		} else {
			r.Message = v.AsString()
		}
	}
	if attr, found := content.Attributes["condition"]; found {
		r.Condition, r.ConditionRange = attr.Expr, attr.Expr.Range()
		for _, t := range attr.Expr.Variables() {
			if root := t.RootName(); root != RuleRootPlan && root != RuleRootChange {
				*diags = append(*diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Unknown name in a policy rule",
					Detail: fmt.Sprintf("The condition refers to %s. A rule sees only plan (the plan document's "+
						"nodes and totals) and change (the change against a base plan, null without one); "+
						"variables, locals and node references of the configuration are not visible to it.",
						traversalName(t)),
					Subject: t.SourceRange().Ptr(),
				})
				ok = false
			}
		}
	}
	if !ok {
		return nil
	}
	return r
}
