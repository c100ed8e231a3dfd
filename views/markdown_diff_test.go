package views

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/plandiff"
	"github.com/kewplan/kewplan/planner"
)

// hugeDiff is a diff far over GitHub's comment limit: thousands of new nodes, each with credentials and a long
// argv, and as many changed ones.
func hugeDiff(nodes int) *plandiff.Diff {
	base := &jsonplan.Document{FormatVersion: "1.0"}
	head := &jsonplan.Document{FormatVersion: "1.0"}
	for i := 0; i < nodes; i++ {
		name := fmt.Sprintf("node-%05d", i)
		c := &planner.Container{Name: "kew-" + name, Node: name, RunID: planner.RunPlaceholder, Checkout: planner.CheckoutPlaceholder,
			Image: "ghcr.io/acme/agent@sha256:" + strings.Repeat("a", 64), Network: "kew-allowlist", PidsLimit: 512,
			Memory: "4g", Env: []string{"ANTHROPIC_API_KEY"}, Args: []string{"--model", "claude-sonnet-4-5"}}
		n := jsonplan.NodeDocument{Name: name, Runner: "claude-code", Role: "worker", Image: c.Image, Network: "allowlist",
			Credentials: []string{"ANTHROPIC_API_KEY"}, CredentialOrigins: []string{"builtin"}, Argv: c.Argv(),
			Range: &jsonplan.Range{Filename: "main.hcl", Start: jsonplan.Pos{Line: i + 1, Column: 1}, End: jsonplan.Pos{Line: i + 1, Column: 5}}}
		if i%2 == 0 {
			head.Nodes = append(head.Nodes, n)
			continue
		}
		base.Nodes = append(base.Nodes, n)
		c.PidsLimit, c.Memory = 65536, ""
		n.Argv = c.Argv()
		head.Nodes = append(head.Nodes, n)
	}
	return plandiff.Compare("base.json", base, "head.json", head)
}

func TestDiffMarkdownFitsComment(t *testing.T) {
	d := hugeDiff(4000)
	md := diffMarkdown(d, markdownCommentLimit)
	if len(md) > markdownCommentLimit {
		t.Fatalf("markdown is %d bytes, over the %d-character comment limit", len(md), markdownCommentLimit)
	}
	if !strings.HasPrefix(md, diffCommentMarker+"\n## kewplan diff\n\n**:warning: Review required: ") {
		t.Errorf("the comment must open with the marker and the verdict line:\n%s", md[:200])
	}
	if !strings.Contains(md, "This comment is truncated:") {
		t.Errorf("a truncated comment must say so")
	}
	if strings.Index(md, "### Credential exposure delta") > strings.Index(md, "### Nodes") && strings.Contains(md, "### Nodes") {
		t.Errorf("the exposure delta must come first")
	}
	checkMarkdownBalanced(t, md)
	// Small limits cut at every block boundary; each cut must stay within its limit and balanced.
	for _, limit := range []int{2000, 5000, 20000} {
		md := diffMarkdown(d, limit)
		if len(md) > limit {
			t.Errorf("limit %d: markdown is %d bytes", limit, len(md))
		}
		checkMarkdownBalanced(t, md)
	}
}

func TestDiffMarkdownNotTruncatedWhenItFits(t *testing.T) {
	md := diffMarkdown(hugeDiff(6), markdownCommentLimit)
	if strings.Contains(md, "truncated") {
		t.Errorf("a small diff must not be truncated:\n%s", md)
	}
	checkMarkdownBalanced(t, md)
}

// checkMarkdownBalanced checks that no cut or value left a <details> element or a code fence open.
func checkMarkdownBalanced(t *testing.T, md string) {
	t.Helper()
	if open, closed := strings.Count(md, "<details>"), strings.Count(md, "</details>"); open != closed {
		t.Errorf("%d <details> but %d </details>", open, closed)
	}
	var fence string
	for _, line := range strings.Split(md, "\n") {
		trimmed := strings.TrimLeft(line, "`")
		ticks := len(line) - len(trimmed)
		switch {
		case fence == "" && ticks >= 3:
			fence = line[:ticks]
		case fence != "" && line == fence:
			fence = ""
		}
	}
	if fence != "" {
		t.Errorf("code fence %q left open", fence)
	}
}

// TestDiffMarkdownEscapesPlanValues feeds values a hostile pull request could put in its configuration: they
// must not close the markup, forge a verdict or mention anyone.
func TestDiffMarkdownEscapesPlanValues(t *testing.T) {
	evil := "x`</details>| **Approved** @everyone <img src=x onerror=alert(1)>\n# Verdict: ok"
	fence := "```\n+ all good\n```"
	d := &plandiff.Diff{
		Base: plandiff.Side{Name: "base.json"}, Head: plandiff.Side{Name: "head.json"},
		Exposure: []plandiff.Finding{{Kind: plandiff.KindImageUnpinned, Widening: true, Node: "n", Message: "Image " + evil}},
		Added:    []plandiff.NodeSummary{{Name: "n", Runner: "r", Image: evil, Credentials: []string{evil}}},
		Changed: []plandiff.NodeChange{{Name: "c", Fields: []plandiff.FieldChange{{Field: "model", Base: "a", Head: evil}},
			Argv: []plandiff.WordEdit{{Op: " ", Word: "docker"}, {Op: " ", Word: "run"}, {Op: "+", Word: fence}}}},
	}
	md := diffMarkdown(d, markdownCommentLimit)
	for _, bad := range []string{"</details>|", "@everyone", "<img", "\n# Verdict", "| **Approved**"} {
		if strings.Contains(md, bad) {
			t.Errorf("markdown carries %q unescaped:\n%s", bad, md)
		}
	}
	if strings.Count(md, "<details>") != strings.Count(md, "</details>") {
		t.Errorf("a value closed a <details> element:\n%s", md)
	}
	if !strings.Contains(md, "````diff") {
		t.Errorf("an argv word with a fence must get a longer fence:\n%s", md)
	}
	checkMarkdownBalanced(t, md)
}
