package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// parseExpr parses src as a native-syntax expression.
func parseExpr(t *testing.T, src string) hclsyntax.Expression {
	t.Helper()
	expr, diags := hclsyntax.ParseExpression([]byte(src), "t.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatalf("%s: %s", src, diags)
	}
	return expr
}

// checkPredicate checks a predicate on expressions against a table of sources.
func checkPredicate(t *testing.T, name string, pred func(hcl.Expression) bool, table map[string]bool) {
	t.Helper()
	for src, want := range table {
		if got := pred(parseExpr(t, src)); got != want {
			t.Errorf("%s(%s) = %v, want %v", name, src, got, want)
		}
	}
}

func TestValueDependent(t *testing.T) {
	checkPredicate(t, "valueDependent", valueDependent, map[string]bool{
		`"text"`:                           false,
		`var.model`:                        false,
		`"After ${node.a.commit}."`:        false,
		`upper(var.model)`:                 false,
		`[for s in var.l : s if s != ""]`:  false,
		`var.on ? "a" : "b"`:               true,
		`"%{if var.on}a%{endif}"`:          true,
		`var.a && var.b`:                   true,
		`var.a || false`:                   true,
		`try(var.m.name, "none")`:          true,
		`can(var.m.name)`:                  true,
		`upper(var.on ? "a" : var.model)`:  true,
		`[for s in var.l : try(s.x, "")]`:  true,
		`{ for k, v in var.m : k => v }`:   false,
		`length(var.l) > 0 && var.enabled`: true,
		`[node.a, node.b["k"]]`:            false,
	})
}

func TestIsLiteral(t *testing.T) {
	checkPredicate(t, "isLiteral", isLiteral, map[string]bool{
		`"https://github.com/acme/a.git"`: true,
		`5`:                               true,
		`"a${var.b}"`:                     false,
		`var.b`:                           false,
		`lower("A")`:                      false,
	})
}

// TestLoadForPlanningDefersValueCheck: LoadForPlanning leaves out exactly Load's evaluation of node attributes
// when the load is otherwise clean, CheckValues(nil) gives it back, and CheckValues(planned) evaluates only the
// nodes planning did not stand for. When the load fails anyway, LoadForPlanning's diagnostics are Load's.
func TestLoadForPlanningDefersValueCheck(t *testing.T) {
	const nodes = `
variable "name" {
  type    = string
  default = "n"
}
node "plain" {
  runner = "claude-code"
  repo   = "https://github.com/acme/a.git"
  prompt = var.name.nope
}
node "branchy" {
  runner = "claude-code"
  repo   = "https://github.com/acme/a.git"
  prompt = true ? 5 + "x" : var.name
}
`
	summaries := func(diags hcl.Diagnostics) []string {
		var out []string
		for _, d := range diags {
			out = append(out, d.Summary+" @ "+d.Subject.String())
		}
		return out
	}
	path := writeConfig(t, nodes)
	_, full := Load(path)
	if !full.HasErrors() {
		t.Fatal("Load found no error")
	}
	cfg, deferred := LoadForPlanning(path)
	if len(deferred) != 0 {
		t.Fatalf("LoadForPlanning reported %s, want nothing before the value check", deferred)
	}
	rest := cfg.CheckValues(nil)
	all := append(deferred, rest...)
	SortDiagnostics(all)
	if diff := cmp.Diff(summaries(full), summaries(all)); diff != "" {
		t.Errorf("LoadForPlanning then CheckValues(nil) differs from Load (-Load +deferred):\n%s", diff)
	}

	// Both nodes planned: only the one holding a conditional is evaluated again.
	got := summaries(cfg.CheckValues(func(string) bool { return true }))
	want := []string{`Invalid operand @ main.hcl:14,23-26`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CheckValues(every node planned) mismatch (-want +got):\n%s", diff)
	}
	// "plain" not planned (left out by --target, say): it is evaluated too.
	got = summaries(cfg.CheckValues(func(name string) bool { return name != "plain" }))
	want = []string{`Invalid operand @ main.hcl:14,23-26`, `Unsupported attribute @ main.hcl:9,20-25`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CheckValues(plain not planned) mismatch (-want +got):\n%s", diff)
	}

	// A load that fails for another reason reports the value check's errors with its own, as Load does.
	path = writeConfig(t, nodes+"\nnode \"broken\" {\n  bogus = 1\n}\n")
	_, full = Load(path)
	_, deferred = LoadForPlanning(path)
	if diff := cmp.Diff(summaries(full), summaries(deferred)); diff != "" {
		t.Errorf("a failed LoadForPlanning differs from Load (-Load +LoadForPlanning):\n%s", diff)
	}
}

func writeConfig(t *testing.T, src string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "main.hcl")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestExprValue: exprValue's value and diagnostics are HCL's own, for the quoted strings it evaluates itself and
// for everything it leaves to HCL.
func TestExprValue(t *testing.T) {
	ctx := &hcl.EvalContext{Variables: map[string]cty.Value{"var": cty.ObjectVal(map[string]cty.Value{
		"s": cty.StringVal("x"), "u": cty.UnknownVal(cty.String), "n": cty.NullVal(cty.String)})}}
	for _, src := range []string{`"https://github.com/acme/a.git"`, `""`, `"e\u0301"`, `"a${var.s}"`, `"${var.s}"`,
		`"a${var.u}"`, `"a${var.n}"`, `var.s`, `5`, `"%{if true}y%{endif}"`, `<<EOT
heredoc
EOT
`} {
		expr := parseExpr(t, src)
		want, wantDiags := expr.Value(ctx)
		got, gotDiags := exprValue(expr, ctx)
		if !got.RawEquals(want) || len(gotDiags) != len(wantDiags) {
			t.Errorf("exprValue(%s) = %#v, %s; want %#v, %s", src, got, gotDiags, want, wantDiags)
		}
	}
}

// TestExpressionVariables: expressionVariables finds what hclsyntax's walk finds, in the same order.
func TestExpressionVariables(t *testing.T) {
	for _, src := range []string{`"text"`, `var.model`, `"After ${node.a.commit} and ${var.b[0]}."`, `[node.a, node.b["k"]]`,
		`[for s in var.l : "${s}-${var.suffix}"]`, `upper("${var.a}") == local.b ? [node.x] : []`, `{ k = var.v }`,
		`"%{for x in var.xs}${x}${local.sep}%{endfor}"`, `[["${var.a}"], [node.b.commit, 5]]`, `5`} {
		expr := parseExpr(t, src)
		want, got := expr.Variables(), expressionVariables(expr)
		if len(got) != len(want) {
			t.Errorf("%s: %d traversals, want %d", src, len(got), len(want))
			continue
		}
		for i := range want {
			if got[i].RootName() != want[i].RootName() || got[i].SourceRange() != want[i].SourceRange() {
				t.Errorf("%s: traversal %d at %s, want %s", src, i, got[i].SourceRange(), want[i].SourceRange())
			}
		}
	}
}
