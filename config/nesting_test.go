package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"
)

func TestCheckNesting(t *testing.T) {
	n := MaxNesting
	parens := func(k int) string { return strings.Repeat("(", k) + "1" + strings.Repeat(")", k) }
	type pos struct{ Line, Column int }
	for _, tc := range []struct {
		name     string
		src      string
		template bool
		want     *pos // nil: accepted
	}{
		{name: "at the limit", src: "a = " + parens(n) + "\n"},
		{name: "past the limit", src: "x = 1\na = " + parens(n+1) + "\n", want: &pos{2, 5 + n}},
		{name: "brackets", src: "a = " + strings.Repeat("[", n+1), want: &pos{1, 5 + n}},
		{name: "objects", src: "a = " + strings.Repeat("{b = ", n+1), want: &pos{1, 5 + 5*n}},
		{name: "blocks", src: strings.Repeat("b {\n", n+1), want: &pos{n + 1, 3}},
		{name: "in a string", src: `a = "` + strings.Repeat("((", 10*n) + "\"\n"},
		{name: "in comments", src: "# " + strings.Repeat("[", 10*n) + "\n// " + strings.Repeat("{", 10*n) + "\n/* " + strings.Repeat("(", 10*n) + " */\na = 1\n"},
		{name: "in a heredoc", src: "a = <<-EOT\n  " + strings.Repeat("[", 10*n) + "\n  EOT\nb = [1]\n"},
		{name: "after a heredoc", src: "a = <<EOT\nx\nEOT\nb = " + strings.Repeat("[", n+1), want: &pos{4, 5 + n}},
		{name: "escaped quote", src: `a = "\"(((" ` + "\nb = 1\n"},
		{name: "interpolations", src: "a = " + strings.Repeat(`"${`, n), want: &pos{1, 5 + 3*(n/2)}},
		{name: "literal interpolation", src: `a = "` + strings.Repeat("$${", 10*n) + "\"\n"},
		{name: "unary not", src: "a = " + strings.Repeat("!", n+1) + "true\n", want: &pos{1, 5 + n}},
		{name: "not equal", src: "a = " + strings.Repeat("1 != 1 && ", n) + "true\n"},
		{name: "unary minus", src: "a = " + strings.Repeat("- ", n+1) + "1\n", want: &pos{1, 5 + 2*n}},
		{name: "dashed names", src: "a = " + strings.Repeat("claude-code-x-y-z.", 2*n) + "b\n"},
		{name: "negative numbers on lines", src: "a = [\n" + strings.Repeat("-1,\n", 2*n) + "]\nb = {\n" + strings.Repeat("x = -1\n", 2*n) + "}\n"},
		{name: "conditionals", src: "a = " + strings.Repeat("c ? 1 : ", n+1) + "2\n", want: &pos{1, 7 + 8*n}},
		{name: "conditionals across lines", src: strings.Repeat("a = c ? 1 : 2\n", 2*n)},
		{name: "template directives", template: true, src: strings.Repeat("%{ if x }", n), want: &pos{1, 9*(n-1) + 1}},
		{name: "exponents", src: "a = [" + strings.Repeat("1e-5 + ", 2*n) + "1]\n"},
		{name: "template directives closed", template: true, src: strings.Repeat("%{ if x }y%{ endif }", 2*n)},
		{name: "template text", template: true, src: strings.Repeat("(([[{{", 2*n)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := CheckNesting
			if tc.template {
				check = CheckTemplateNesting
			}
			d := check("x.hcl", []byte(tc.src))
			var got *pos
			if d != nil {
				got = &pos{d.Subject.Start.Line, d.Subject.Start.Column}
				if d.Summary != "Nesting too deep" || d.Subject.Filename != "x.hcl" {
					t.Errorf("diagnostic = %s: %s", d.Subject, d.Summary)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("CheckNesting() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDeepNestingDoesNotCrash: the inputs that overflowed the parser's stack get a diagnostic at the
// line where the limit was crossed, from every entry point that parses HCL.
func TestDeepNestingDoesNotCrash(t *testing.T) {
	const k = 100_000
	hostile := map[string]struct {
		body string
		line int // where the limit is crossed
	}{
		"parens":       {"a = " + strings.Repeat("(", k) + "1" + strings.Repeat(")", k) + "\n", 2},
		"brackets":     {"a = " + strings.Repeat("[", k) + strings.Repeat("]", k) + "\n", 2},
		"not":          {"a = " + strings.Repeat("!", k) + "true\n", 2},
		"minus":        {"a = " + strings.Repeat("-", k) + "1\n", 2},
		"conditionals": {"a = " + strings.Repeat("true ? 1 : ", k) + "2\n", 2},
		"blocks":       {strings.Repeat("b {\n", k) + strings.Repeat("}\n", k), 2 + MaxNesting},
		"templates":    {"a = " + strings.Repeat(`"${`, k) + "\n", 2},
	}
	for name, tc := range hostile {
		body := tc.body
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			src := "# a hostile configuration\n" + body
			p := filepath.Join(dir, "main.hcl")
			if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			_, diags := Load(p)
			wantNestingError(t, diags, tc.line)

			_, diags = ParsePolicy([]byte(src), "policy.hcl")
			wantNestingError(t, diags, tc.line)

			cfg, _ := Load(writeFile(t, dir, "ok.hcl", "variable \"x\" {\n  type = list(number)\n}\n"))
			vf := writeFile(t, dir, "vars.tfvars", "# vars\n"+body)
			_, diags = cfg.ResolveVariables(VariableInputs{VarFiles: []string{vf}})
			wantNestingError(t, diags, tc.line)

			_, diags = cfg.ResolveVariables(VariableInputs{Vars: []string{"x=" + strings.Repeat("[", k)}})
			if !diags.HasErrors() {
				t.Error("a deeply nested --var value was accepted")
			}
		})
	}
}

func wantNestingError(t *testing.T, diags hcl.Diagnostics, line int) {
	t.Helper()
	for _, d := range diags {
		if d.Summary == "Nesting too deep" && d.Subject != nil && d.Subject.Start.Line == line {
			return
		}
	}
	t.Errorf("want a Nesting too deep error at line %d, got %v", line, diags)
}

func TestTemplateFileNesting(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "t.tpl", strings.Repeat("${", 100_000))
	writeFile(t, dir, "main.hcl", "node \"a\" {\n  runner = \"claude-code\"\n  repo = \"r\"\n  prompt = templatefile(\"t.tpl\", {})\n}\n")
	_, diags := fullCheck(dir)
	if !strings.Contains(diags.Error(), "t.tpl is not a valid template: line 1: Nesting too deep") {
		t.Fatalf("diagnostics = %v", diags)
	}
}

func BenchmarkCheckNesting(b *testing.B) {
	src, err := os.ReadFile("../examples/review-pipeline.hcl")
	if err != nil {
		b.Fatal(err)
	}
	src = []byte(strings.Repeat(string(src), 100))
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if d := CheckNesting("x.hcl", src); d != nil {
			b.Fatal(d)
		}
	}
}

func TestSuggestName(t *testing.T) {
	for in, want := range map[string]string{
		"café":         "cafe",
		"Straße-fix":   "Strasse-fix",
		"øresund":      "oresund",
		"naïve review": "naive-review",
		"1st":          "st",
		"日本":           "my-node",
		"fix 日本 now":   "fix-now",
		"a\u202eb":     "a-b",
	} {
		if got := suggestName(in); got != want {
			t.Errorf("suggestName(%q) = %q, want %q", in, got, want)
		}
	}
}
