package planner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/zclconf/go-cty/cty"

	"github.com/kewplan/kewplan/config"
)

const budgetSandbox = `
sandbox {
  memory = "4g"
  images = {
    claude-code = "kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4"
    opencode    = "kew-opencode@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4"
  }
  budget {
    max_usd   = 2
    max_turns = 200
  }
}

variable "model" {
  type = string
}
`

func planBudgetSource(t *testing.T, src string, vars map[string]cty.Value) *Plan {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(budgetSandbox+src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := config.Load(dir)
	if diags.HasErrors() {
		t.Fatalf("Load: %s", diags.Error())
	}
	p, _ := Build(cfg, Inputs{Vars: vars, FS: os.DirFS(dir)})
	return p
}

// TestBudgetUnpriced: a max_usd fails closed exactly when neither a price nor a live reported cost exists.
func TestBudgetUnpriced(t *testing.T) {
	node := func(name, runner, model string) string {
		return `
node "` + name + `" {
  runner = "` + runner + `"
  model  = ` + model + `
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Do it."
}
`
	}
	p := planBudgetSource(t,
		node("priced", "claude-code", `"claude-sonnet-4-5"`)+
			node("unpriced", "claude-code", `"claude-next"`)+
			node("live", "opencode", `"some/unpriced-model"`)+
			node("later", "claude-code", `node.priced.branch`),
		map[string]cty.Value{"model": cty.StringVal("x")})
	got := map[string]bool{}
	for _, d := range p.Diagnostics {
		if DiagnosticRuleID(d) == RuleBudgetUnpriced {
			got[strings.SplitN(d.Detail, `"`, 3)[1]] = true
		}
	}
	want := map[string]bool{"unpriced": true, "later": true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("budget-unpriced nodes mismatch (-want +got):\n%s", diff)
	}
	sources := map[string]string{}
	for _, np := range p.Nodes {
		sources[np.Name] = np.Budget.CostSource
		if (np.Name == "unpriced" || np.Name == "later") != (np.Container == nil) {
			t.Errorf("node %q: container %v, want it refused only for an unpriced cap", np.Name, np.Container != nil)
		}
	}
	if diff := cmp.Diff(map[string]string{"priced": "estimated", "unpriced": "unknown", "live": "reported", "later": "unknown"}, sources); diff != "" {
		t.Errorf("cost sources mismatch (-want +got):\n%s", diff)
	}
}

// TestBudgetLayers: the node's block replaces the sandbox's attribute by attribute; the worst case sums node caps.
func TestBudgetLayers(t *testing.T) {
	p := planBudgetSource(t, `
budget {
  max_usd = 3
}

node "a" {
  runner  = "claude-code"
  model   = "claude-sonnet-4-5"
  repo    = "https://github.com/acme/widgets.git"
  prompt  = "Do it."
  timeout = "45m"
  budget {
    max_usd    = 1.5
    max_tokens = 1000
  }
}

node "b" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Do it."
}

node "c" {
  runner  = "claude-code"
  model   = "claude-sonnet-4-5"
  repo    = "https://github.com/acme/widgets.git"
  prompt  = "Do it."
  timeout = "10m"
}

node "d" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Do it."
}

node "fix" {
  for_each = toset(["api", "web"])
  runner   = "claude-code"
  model    = "claude-sonnet-4-5"
  repo     = "https://github.com/acme/widgets.git"
  prompt   = "Do it."
  timeout  = "5m"
  budget {
    max_usd = 0.5
  }
}
`, map[string]cty.Value{"model": cty.StringVal("x")})
	type caps struct {
		USD     float64
		Tokens  *int64
		Turns   int64
		Timeout string
		Origins map[string]string
	}
	got := map[string]caps{}
	for _, n := range p.Nodes {
		got[n.Name] = caps{*n.Budget.MaxUSD, n.Budget.MaxTokens, *n.Budget.MaxTurns, config.FormatDuration(n.Budget.Timeout), n.Budget.Origins}
	}
	thousand := int64(1000)
	want := map[string]caps{
		"a": {1.5, &thousand, 200, "45m", map[string]string{"max_usd": "node", "max_tokens": "node", "max_turns": "sandbox", "timeout": "node"}},
		"b": {2, nil, 200, "1h", map[string]string{"max_usd": "sandbox", "max_turns": "sandbox", "timeout": "default"}},
		"c": {2, nil, 200, "10m", map[string]string{"max_usd": "sandbox", "max_turns": "sandbox", "timeout": "node"}},
		"d": {2, nil, 200, "1h", map[string]string{"max_usd": "sandbox", "max_turns": "sandbox", "timeout": "default"}},
		// An instance's caps are its block's.
		`fix["api"]`: {0.5, nil, 200, "5m", map[string]string{"max_usd": "node", "max_turns": "sandbox", "timeout": "node"}},
		`fix["web"]`: {0.5, nil, 200, "5m", map[string]string{"max_usd": "node", "max_turns": "sandbox", "timeout": "node"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("caps mismatch (-want +got):\n%s", diff)
	}
	if p.Budget.WorstCaseUSD == nil || *p.Budget.WorstCaseUSD != 8.5 || *p.Budget.MaxUSD != 3 || len(p.Budget.Unbounded) != 0 {
		t.Errorf("apply budget = %+v, want worst case 8.5 against max_usd 3", p.Budget)
	}
}
