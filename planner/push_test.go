package planner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/kewplan/kewplan/config"
)

// planHCL plans one configuration file's text, with an optional --policy file's text.
func planHCL(t *testing.T, src, policy string) *Plan {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := config.Load(dir)
	if diags.HasErrors() {
		t.Fatalf("config.Load: %v", diags)
	}
	vars, diags := cfg.ResolveVariables(config.VariableInputs{})
	if diags.HasErrors() {
		t.Fatalf("ResolveVariables: %v", diags)
	}
	in := Inputs{Vars: vars, FS: os.DirFS(dir)}
	if policy != "" {
		pol, d := config.ParsePolicy([]byte(policy), "org.hcl")
		if d.HasErrors() {
			t.Fatalf("ParsePolicy: %v", d)
		}
		in.Policy = pol
	}
	p, _ := Build(cfg, in)
	return p
}

const pushSandbox = `
sandbox {
  memory             = "4g"
  protected_branches = ["prod/*", "hotfix/**"]
  images             = { claude-code = "kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4" }
}
`

func pushNode(name, attrs string) string {
	return `node "` + name + `" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Do the work."
` + attrs + "\n}\n"
}

// findings returns each diagnostic of rule id as "node-line" pairs: the line of its subject.
func ruleLines(p *Plan, id string) []int {
	var lines []int
	for _, d := range p.Diagnostics {
		if DiagnosticRuleID(d) == id && d.Subject != nil {
			lines = append(lines, d.Subject.Start.Line)
		}
	}
	return lines
}

func TestProtectedBranchesRefusedAtPlan(t *testing.T) {
	cases := []struct {
		name, attrs string
		refused     bool
	}{
		{"default-branch", ``, false},
		{"own-branch", `branch = "agents/fix"`, false},
		{"main", `branch = "main"`, true},
		{"master-refs", `branch = "refs/heads/master"`, true},
		{"trunk", `branch = "trunk"`, true},
		{"develop", `branch = "develop"`, true},
		{"release", `branch = "release/2.0"`, true},
		{"release-deeper", `branch = "release/2.0/rc"`, false}, // * stays within one component
		{"sandbox-pattern", `branch = "prod/eu-1"`, true},
		{"sandbox-double-star", `branch = "hotfix/a/b"`, true},
		{"cloned-branch", "ref = \"feature/x\"\nbranch = \"feature/x\"", true},
		{"cloned-commit", "ref = \"0123456789abcdef0123456789abcdef01234567\"\nbranch = \"0123456789abcdef0123456789abcdef01234567\"", false},
		{"cloned-tag", "ref = \"refs/tags/v1\"\nbranch = \"v1\"", false},
		{"reviewer-on-main", "role = \"reviewer\"\nbranch = \"main\"", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := planHCL(t, pushSandbox+pushNode("fix", tc.attrs), "")
			refused := len(ruleLines(p, RulePushProtectedBranch)) > 0
			if refused != tc.refused {
				t.Fatalf("refused = %v, want %v; diagnostics: %v", refused, tc.refused, p.Diagnostics)
			}
			np := p.Node("fix")
			if refused && (np.Container != nil || !np.Errors) {
				t.Errorf("a refused node keeps its argv")
			}
			if refused {
				for _, d := range p.Diagnostics {
					if DiagnosticRuleID(d) == RulePushProtectedBranch && (d.Subject == nil || d.Subject.Filename == "") {
						t.Errorf("diagnostic without file:line: %v", d)
					}
				}
			}
		})
	}
}

func TestAllowProtectedPushIsAWarning(t *testing.T) {
	p := planHCL(t, pushSandbox+pushNode("fix", "branch = \"main\"\nallow_protected_push = true"), "")
	if p.HasErrors() {
		t.Fatalf("plan has errors: %v", p.Diagnostics)
	}
	if got := ruleLines(p, RuleProtectedPush); len(got) != 1 || got[0] != 13 {
		t.Errorf("protected-push at lines %v, want [13] (the allow_protected_push attribute)", got)
	}
	np := p.Node("fix")
	if !np.AllowProtectedPush || np.Container == nil {
		t.Errorf("AllowProtectedPush = %v, argv %v", np.AllowProtectedPush, np.Container != nil)
	}
}

func TestAllowProtectedPushMustBeLiteral(t *testing.T) {
	dir := t.TempDir()
	src := pushSandbox + "variable \"yes\" {\n  default = true\n}\n" + pushNode("fix", "allow_protected_push = var.yes")
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	_, diags := config.Load(dir)
	if !diags.HasErrors() || !strings.Contains(diags.Error(), "allow_protected_push") {
		t.Fatalf("a variable switched allow_protected_push: %v", diags)
	}
}

func TestPolicyPush(t *testing.T) {
	src := pushSandbox + pushNode("fix", `branch = "agents/fix"`) +
		strings.Replace(pushNode("other", `branch = "kew/other"`), "acme/widgets", "evil/widgets", 1) +
		pushNode("review", `role = "reviewer"`)
	p := planHCL(t, src, `policy {
  allowed_repositories = ["github.com/acme/*"]
  allowed_branches     = ["kew/**"]
}`)
	var details []string
	for _, d := range p.Diagnostics {
		if DiagnosticRuleID(d) == RulePolicyPush {
			if d.Severity != hcl.DiagError {
				t.Errorf("policy-push is not an error: %v", d)
			}
			details = append(details, d.Detail)
		}
	}
	if len(details) != 2 {
		t.Fatalf("policy-push findings: %q, want the branch of fix and the repository of other", details)
	}
	if !strings.Contains(details[0], `"agents/fix"`) || !strings.Contains(details[1], "github.com/evil/widgets") {
		t.Errorf("findings: %q", details)
	}
	if p.Node("review").Errors {
		t.Errorf("a reviewer pushes nothing, so the push policy does not refuse it")
	}
}

func TestMaskURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://x-access-token:ghp_secret@github.com/acme/w.git": "https://***@github.com/acme/w.git",
		"https://ghp_secret@github.com/acme/w.git":                "https://***@github.com/acme/w.git",
		"https://github.com/acme/w.git?token=abc":                 "https://github.com/acme/w.git?***",
		"https://github.com/acme/w.git":                           "https://github.com/acme/w.git",
		"git@github.com:acme/w.git":                               "git@github.com:acme/w.git",
		"/srv/git/w.git":                                          "/srv/git/w.git",
	} {
		if got := MaskURL(in); got != want {
			t.Errorf("MaskURL(%q) = %q, want %q", in, got, want)
		}
		if strings.Contains(MaskURL(in), "secret") {
			t.Errorf("MaskURL(%q) keeps the secret", in)
		}
	}
}
