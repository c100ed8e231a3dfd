package policyrules

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/kewplan/kewplan/plandiff"
)

// TestDocumentedExamples evaluates every example of docs/policy.md's tables (the objects a rule sees, and the
// literal attributes written as rules) against a plan and a change, so that the page names only what a rule can
// read: each must be judged (true or false), never fail.
func TestDocumentedExamples(t *testing.T) {
	src, err := os.ReadFile("../docs/policy.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| [^|]+ \\| `(.+?)` \\|")
	var examples []string
	for _, line := range strings.Split(string(src), "\n") {
		if m := row.FindStringSubmatch(line); m != nil {
			examples = append(examples, strings.ReplaceAll(m[1], `\|`, "|"))
		}
	}
	if len(examples) < 30 {
		t.Fatalf("found %d examples in docs/policy.md, want at least 30: has the table's shape changed?", len(examples))
	}
	base, head := fanOut("claude-opus-4-1", 2), fanOut("claude-opus-4-1", 3)
	change := plandiff.Compare("base", base, "head", head)
	for _, ex := range examples {
		rules := parseRules(t, fmt.Sprintf("policy {\n  rule \"r\" {\n    level     = \"warn\"\n    condition = %s\n    message   = \"m\"\n  }\n}\n", wrapNode(ex)))
		for _, in := range []Input{{Plan: head, Change: change}} {
			if r := Evaluate(rules, in); len(r.Findings) > 0 && r.Findings[0].Failed {
				t.Errorf("docs/policy.md example %s cannot be judged: %s", ex, r.Findings[0].Problem)
			}
		}
	}
}

// wrapNode puts an example about one node (n.…) in a for expression over the nodes.
func wrapNode(ex string) string {
	if strings.Contains(ex, "n.") && !strings.Contains(ex, "for n in") {
		return "anytrue([for n in plan.nodes : " + ex + "])"
	}
	return ex
}
