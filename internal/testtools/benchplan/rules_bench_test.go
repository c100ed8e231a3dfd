package benchplan

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// benchRules are twenty policy rules of the shapes an organisation writes: each iterates the nodes once (one
// also each node's credentials), or reads the totals; a warn matches so that attribution is measured too.
func benchRules() string {
	conditions := []string{
		`anytrue([for n in plan.nodes : n.model == "claude-opus-4-1" && n.instances > 10])`,
		`anytrue([for n in plan.nodes : n.push != null && !startswith(n.push.branch, "kew/")])`,
		`anytrue([for n in plan.nodes : n.network == "open" && length(n.credentials) > 0])`,
		`anytrue([for n in plan.nodes : n.runtime == "runc" && n.role == "worker"])`,
		`anytrue([for n in plan.nodes : contains(n.egress_hosts, "evil.example")])`,
		`anytrue(flatten([for n in plan.nodes : [for c in n.credentials : c == "GITHUB_TOKEN"]]))`,
		`anytrue([for n in plan.nodes : n.credential_mode == "forward"])`,
		`anytrue([for n in plan.nodes : endswith(n.image, ":latest")])`,
		`anytrue([for n in plan.nodes : n.pids_limit > 4096])`,
		`anytrue([for n in plan.nodes : length(n.provider_fetch) > 0])`,
		`length([for n in plan.nodes : n if n.model == "claude-opus-4-1"]) > 50`,
		`alltrue([for n in plan.nodes : n.memory != ""]) == false`,
		`anytrue([for n in plan.nodes : lower(n.runner) != n.runner])`,
		`anytrue([for n in plan.nodes : n.budget != null && n.budget.max_usd != null && n.budget.max_usd > 100])`,
		`anytrue([for n in plan.nodes : strcontains(n.repository, "secret")])`,
		`anytrue([for n in plan.nodes : n.errors])`,
		`anytrue([for n in plan.nodes : length(n.private_hosts) > 0])`,
		`plan.totals.nodes > 5000`,
		`plan.budget != null && plan.budget.worst_case_usd != null && plan.budget.worst_case_usd > 1000`,
		`change != null && length(change.widenings) > 0`,
	}
	var b strings.Builder
	b.WriteString("policy {\n")
	for i, c := range conditions {
		fmt.Fprintf(&b, "  rule \"r%02d\" {\n    level     = \"warn\"\n    condition = %s\n    message   = \"Rule %d.\"\n  }\n", i, c, i)
	}
	b.WriteString("}\n")
	return b.String()
}

// BenchmarkPlanRules: `plan --json` of the 10,000-node fan-out with the twenty rules of benchRules in a --policy
// file, against the same plan without rules, in the same iteration. rules/plan is the ratio of the mean wall
// times (the goal: at most 1.3, rules adding at most 0.3x); med-rules/plan the median of each iteration's ratio.
func BenchmarkPlanRules(b *testing.B) {
	const n = 10_000
	dir := generated(b, "fanout", n)
	policy := filepath.Join(b.TempDir(), "policy.hcl")
	if err := os.WriteFile(policy, []byte(benchRules()), 0o600); err != nil {
		b.Fatal(err)
	}
	kewplan(b, 0, "plan", "--json", "--policy", policy, dir) // warm the file cache, and check it plans
	var plain, rules time.Duration
	var ratios []float64
	for b.Loop() {
		p := kewplan(b, 0, "plan", "--json", dir)
		r := kewplan(b, 0, "plan", "--json", "--policy", policy, dir)
		plain += p.wall
		rules += r.wall
		ratios = append(ratios, float64(r.wall)/float64(p.wall))
	}
	N := float64(len(ratios))
	b.ReportMetric(ms(plain)/N, "plan-ms")
	b.ReportMetric(ms(rules)/N, "rules-ms")
	b.ReportMetric(float64(rules)/float64(plain), "rules/plan")
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "med-rules/plan")
}
