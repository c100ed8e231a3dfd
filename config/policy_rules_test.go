package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParsePolicyRules(t *testing.T) {
	src := `
policy {
  rule "opus-fan-out" {
    level     = "deny"
    condition = anytrue([for n in plan.nodes : n.model == "claude-opus-4-1" && n.instances > 10])
    message   = "Opus on a fan-out."
  }
  rule "changed" {
    level     = "review"
    condition = change != null && change.widened
    message   = "Exposure widened."
  }
  approvals {
    required        = 1
    allowed_signers = "allowed_signers"
    when            = "review"
  }
}
`
	p, diags := ParsePolicy([]byte(src), "policy.hcl")
	if diags.HasErrors() {
		t.Fatalf("ParsePolicy() diagnostics: %v", diags)
	}
	var got []string
	for _, r := range p.Rules {
		got = append(got, r.Name+" "+r.Level+" "+r.Message)
	}
	want := []string{"opus-fan-out deny Opus on a fan-out.", "changed review Exposure widened."}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rules mismatch (-want +got):\n%s", diff)
	}
	if r := p.Rules[0]; r.ConditionRange.Start.Line != 5 || r.ConditionRange.Filename != "policy.hcl" || r.Condition == nil {
		t.Errorf("condition range = %v, want policy.hcl line 5", r.ConditionRange)
	}
	if p.Approvals == nil || p.Approvals.When != ApprovalsReview {
		t.Errorf("approvals = %+v, want when = review", p.Approvals)
	}
}

// TestParsePolicyRuleErrors: each fixture carries the summary it must raise.
func TestParsePolicyRuleErrors(t *testing.T) {
	tests := []struct{ name, body, summary string }{
		{"bad level", `level = "block"` + "\n" + `condition = true` + "\n" + `message = "m"`, "Invalid policy rule level"},
		{"level not literal", `level = var.level` + "\n" + `condition = true` + "\n" + `message = "m"`, "Policy values must be literals"},
		{"empty message", `level = "warn"` + "\n" + `condition = true` + "\n" + `message = " "`, "Empty policy rule message"},
		{"no condition", `level = "warn"` + "\n" + `message = "m"`, "Missing required argument"},
		{"a variable", `level = "warn"` + "\n" + `condition = var.x` + "\n" + `message = "m"`, "Unknown name in a policy rule"},
		{"a node reference", `level = "warn"` + "\n" + `condition = node.fix.status == "ok"` + "\n" + `message = "m"`, "Unknown name in a policy rule"},
		{"unknown attribute", `level = "warn"` + "\n" + `condition = true` + "\n" + `message = "m"` + "\n" + `when = "always"`, "Unsupported argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "policy {\n  rule \"r\" {\n" + tt.body + "\n  }\n}\n"
			_, diags := ParsePolicy([]byte(src), "policy.hcl")
			if !hasSummary(diags.Errs(), tt.summary) {
				t.Errorf("ParsePolicy() = %v, want %q", diags, tt.summary)
			}
		})
	}
	for name, src := range map[string]string{
		"Invalid policy rule name": "policy {\n  rule \"Opus Fan Out\" {\n    level = \"warn\"\n    condition = true\n    message = \"m\"\n  }\n}\n",
		"Duplicate policy rule": "policy {\n  rule \"r\" {\n    level = \"warn\"\n    condition = true\n    message = \"m\"\n  }\n" +
			"  rule \"r\" {\n    level = \"deny\"\n    condition = false\n    message = \"m\"\n  }\n}\n",
		"Invalid approvals condition": "policy {\n  approvals {\n    required = 1\n    allowed_signers = \"s\"\n    when = \"reviewed\"\n  }\n}\n",
	} {
		if _, diags := ParsePolicy([]byte(src), "policy.hcl"); !hasSummary(diags.Errs(), name) {
			t.Errorf("ParsePolicy() = %v, want %q", diags, name)
		}
	}
}

func hasSummary(errs []error, summary string) bool {
	for _, e := range errs {
		if strings.Contains(e.Error(), summary) {
			return true
		}
	}
	return false
}

func TestLoadPolicyTestCase(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "opus.policytest.hcl")
	src := `configuration = "../fixtures/opus"
base = "base.plan"
expect {
  deny = ["opus-fan-out"]
  warn = []
}
`
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	tc, _, diags := LoadPolicyTestCase(path)
	if diags.HasErrors() {
		t.Fatalf("LoadPolicyTestCase() diagnostics: %v", diags)
	}
	if tc.ConfigurationPath != filepath.Join(dir, "..", "fixtures", "opus") || tc.BasePath != filepath.Join(dir, "base.plan") ||
		tc.PolicyPath != filepath.Join(dir, "policy.hcl") {
		t.Errorf("paths = %q %q %q", tc.ConfigurationPath, tc.BasePath, tc.PolicyPath)
	}
	want := map[string][]string{"deny": {"opus-fan-out"}, "warn": {}}
	if diff := cmp.Diff(want, tc.Expect); diff != "" {
		t.Errorf("Expect mismatch (-want +got):\n%s", diff)
	}
}
