package planner

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/internal/testtools/golden"
)

// planPolicyCase loads testdata/<name>/main.hcl, and testdata/<name>/org/policy.hcl as the --policy file when it
// exists (in a subdirectory, so that loading the configuration's directory does not read it), and plans it.
func planPolicyCase(t *testing.T, name string) *Plan {
	t.Helper()
	dir := filepath.Join("testdata", name)
	cfg, diags := config.Load(dir)
	if diags.HasErrors() {
		t.Fatalf("config.Load(%s): %v", dir, diags)
	}
	vars, diags := cfg.ResolveVariables(config.VariableInputs{})
	if diags.HasErrors() {
		t.Fatalf("ResolveVariables: %v", diags)
	}
	in := Inputs{Vars: vars, FS: os.DirFS(cfg.Dir)}
	if _, err := os.Stat(filepath.Join(dir, "org", "policy.hcl")); err == nil {
		pol, _, diags := config.LoadPolicyFile(filepath.Join(dir, "org", "policy.hcl"))
		if diags.HasErrors() {
			t.Fatalf("LoadPolicyFile: %v", diags)
		}
		in.Policy = pol
	}
	p, _ := Build(cfg, in)
	return p
}

// policyDiagnosticsText renders the policy diagnostics of a plan for a golden file: rule, range, summary, detail.
func policyDiagnosticsText(diags hcl.Diagnostics) string {
	var b strings.Builder
	for _, d := range diags {
		id := DiagnosticRuleID(d)
		if !strings.HasPrefix(id, "policy-") {
			continue
		}
		rng := "(no range)"
		if d.Subject != nil {
			rng = filepath.ToSlash(d.Subject.String())
		}
		fmt.Fprintf(&b, "%s %s %s\n  %s\n  %s\n\n", severityWord(d.Severity), id, rng, d.Summary, d.Detail)
	}
	return b.String()
}

func severityWord(s hcl.DiagnosticSeverity) string {
	if s == hcl.DiagWarning {
		return "warning"
	}
	return "error"
}

func TestPolicyGolden(t *testing.T) {
	tests := []struct {
		name    string
		refused []string
	}{
		{"policy-violations", []string{"bench", "docs", "fix"}},
		{"policy-file", []string{"fix"}},
		{"policy-clean", nil},
		{"policy-runtime", []string{"crun", "optout"}},
		{"policy-runtime-default", []string{"a", "b"}},
		{"policy-egress", []string{"docs", "fix"}},
		{"policy-private-hosts", []string{"fix"}},
		{"policy-instances", []string{`fix["api"]`, `fix["web"]`}},
		{"policy-provider-fetch", []string{"docs", "fix"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := planPolicyCase(t, tt.name)
			golden.Check(t, filepath.Join("testdata", tt.name, "policy.golden"), []byte(policyDiagnosticsText(p.Diagnostics)))
			var refused []string
			for _, n := range p.Nodes {
				if n.Errors {
					refused = append(refused, n.Name)
					if n.Container != nil {
						t.Errorf("node %s breaks the policy but keeps its container", n.Name)
					}
				}
			}
			if diff := cmp.Diff(tt.refused, sortedStrings(refused)); diff != "" {
				t.Errorf("refused nodes mismatch (-want +got):\n%s", diff)
			}
			if tt.refused == nil && p.HasErrors() {
				t.Errorf("unexpected errors: %v", p.Diagnostics)
			}
		})
	}
}

func sortedStrings(s []string) []string {
	if s == nil {
		return nil
	}
	out := append([]string{}, s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// TestCheckPolicyWithoutConfig covers the exported CheckPolicy on a plan alone: ranges fall back to the nodes'
// blocks, and the plan is not changed.
func TestCheckPolicyWithoutConfig(t *testing.T) {
	nodeRange := hcl.Range{Filename: "main.hcl", Start: hcl.Pos{Line: 7, Column: 1}, End: hcl.Pos{Line: 7, Column: 11}}
	c := &Container{PidsLimit: 2048}
	plan := &Plan{Nodes: []*NodePlan{{
		Name: "fix", Runner: "pi", Image: "pi:latest", Network: config.NetworkOpen,
		Credentials: []string{"OPENROUTER_API_KEY", "EXTRA_KEY"}, Container: c, DeclRange: nodeRange,
	}}}
	pol := &config.Policy{
		RequirePinnedImages: true, AllowedNetworks: []string{"allowlist"}, AllowedImagePrefixes: []string{"ghcr.io/acme/"},
		Credentials: map[string][]string{"OPENROUTER_API_KEY": {"opencode"}}, MaxPidsLimit: 1024,
	}
	diags := CheckPolicy(plan, pol)
	var got []string
	for _, d := range diags {
		if d.Severity != hcl.DiagError || d.Subject == nil || *d.Subject != nodeRange {
			t.Errorf("diagnostic %q: want an error at the node's block, got %v", d.Summary, d.Subject)
		}
		got = append(got, DiagnosticRuleID(d))
	}
	want := []string{
		RulePolicyRequirePinnedImages, RulePolicyAllowedImagePrefixes, RulePolicyAllowedNetworks,
		RulePolicyCredentials, RulePolicyCredentials, RulePolicyMaxPidsLimit,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CheckPolicy() rule ids mismatch (-want +got):\n%s", diff)
	}
	if plan.Nodes[0].Container != c || plan.Nodes[0].Errors {
		t.Errorf("CheckPolicy changed the plan")
	}
	if CheckPolicy(plan, nil) != nil || CheckPolicy(nil, pol) != nil {
		t.Errorf("CheckPolicy with nothing to check should report nothing")
	}
}

func TestPolicyRulesInCatalogue(t *testing.T) {
	for _, r := range PolicyRules() {
		got, ok := LookupRule(r.ID)
		if !ok {
			t.Errorf("rule %s is not in the catalogue", r.ID)
			continue
		}
		if diff := cmp.Diff(r, got); diff != "" {
			t.Errorf("catalogue entry %s mismatch (-want +got):\n%s", r.ID, diff)
		}
		if !strings.HasPrefix(r.ID, "policy-") || r.Summary == "" || r.Description == "" || r.Help == "" {
			t.Errorf("rule %+v: want a policy- id, a summary, a description and help", r)
		}
	}
}
