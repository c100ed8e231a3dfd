package views

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/planner"
)

func TestArgvLines(t *testing.T) {
	c := planner.Container{Name: "kew-fix", Node: "fix", RunID: planner.RunPlaceholder, Checkout: planner.CheckoutPlaceholder,
		Image: "img@sha256:abc", Network: "kew-allowlist", PidsLimit: 512, Memory: "4g",
		Env: []string{"OPENROUTER_API_KEY"}, Args: []string{"--format", "json", "--auto", "--model", "openrouter/x", "--flag=v", "-q"}}
	want := []string{
		"docker run",
		"--rm",
		"--name kew-fix",
		"--read-only",
		"--tmpfs /tmp",
		"--tmpfs /home/agent:exec,uid=1001,gid=1001,mode=0700",
		"--cap-drop ALL",
		"--security-opt no-new-privileges",
		"--pids-limit 512",
		"--network kew-allowlist",
		"--memory 4g",
		"--label kewplan.node=fix",
		"--label 'kewplan.run=<run>'",
		"-v '<checkout>:/work'",
		"-w /work",
		"-e OPENROUTER_API_KEY",
		"img@sha256:abc",
		"--format json",
		"--auto",
		"--model openrouter/x",
		"--flag=v",
		"-q",
	}
	if diff := cmp.Diff(want, argvLines(c.Argv())); diff != "" {
		t.Errorf("ArgvLines() mismatch (-want +got):\n%s", diff)
	}
}

func TestDotQuote(t *testing.T) {
	for in, want := range map[string]string{
		"a":          `"a"`,
		`x"y`:        `"x\"y"`,
		`back\slash`: `"back\\slash"`,
		"two\nlines": `"two\nlines"`,
	} {
		if got := dotQuote(in); got != want {
			t.Errorf("dotQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestWritePlanEmpty(t *testing.T) {
	doc := jsonplan.NewDocument(&planner.Plan{ConfigDigest: "sha256:0"}, "test")
	for name, render := range planFormats {
		var buf bytes.Buffer
		if err := render(&buf, doc); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if buf.Len() == 0 {
			t.Errorf("%s rendered nothing", name)
		}
	}
	var buf bytes.Buffer
	_ = WritePlanJSON(&buf, doc)
	for _, key := range []string{`"nodes": []`, `"exposure": {}`, `"diagnostics": []`} {
		if !strings.Contains(buf.String(), key) {
			t.Errorf("empty plan JSON lacks %s:\n%s", key, buf.String())
		}
	}
}

// TestMarkdownHostileValues: a pull request controls every string in its plan, so none may close the markup, add
// table cells, mention anyone or end the argv's code fence.
func TestMarkdownHostileValues(t *testing.T) {
	hostile := "x`|</details><img src=x>@octocat\n# head"
	doc := &jsonplan.Document{FormatVersion: jsonplan.FormatVersion, ConfigDigest: "sha256:0", Exposure: map[string][]string{}}
	doc.Nodes = []jsonplan.NodeDocument{{Name: "n", Runner: "claude-code", Role: "worker", Image: hostile, Network: "allowlist",
		Runtime: hostile, Model: hostile, Credentials: []string{"K"}, Prompt: jsonplan.PromptDocument{SHA256: "abcdef0123456789", Bytes: 3},
		Repository: hostile, Ref: hostile, Push: &jsonplan.PushDocument{Branch: hostile, PullRequest: &jsonplan.PullRequestDoc{Base: hostile, Title: hostile}},
		Argv: []string{"docker", "run", "img", "```", hostile}}}
	var buf bytes.Buffer
	if err := WritePlanMarkdown(&buf, doc); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	// Text inside a code fence is literal on GitHub; everything before the argv sections is markup.
	markup, _, _ := strings.Cut(out, "### Container argv")
	for _, bad := range []string{"<img", "@octocat", "</details>"} {
		if strings.Contains(markup, bad) {
			t.Errorf("markdown carries %q unescaped:\n%s", bad, out)
		}
	}
	nodes, budget, _ := strings.Cut(out, "### Budget")
	nodes, writes, _ := strings.Cut(nodes, "### Where the work lands")
	for _, part := range []struct {
		text  string
		pipes int
	}{{nodes, 11}, {writes, 5}, {budget, 4}} {
		for _, line := range strings.Split(part.text, "\n") {
			if strings.HasPrefix(line, "| `n`") || strings.HasPrefix(line, "| <code>n") {
				if cells := strings.Count(strings.ReplaceAll(line, `\|`, ""), "|"); cells != part.pipes {
					t.Errorf("node row has %d unescaped pipes, want %d: %s", cells, part.pipes, line)
				}
			}
		}
	}
	if !strings.Contains(out, "````sh\n") {
		t.Errorf("argv holding ``` is not in a longer fence:\n%s", out)
	}
}
