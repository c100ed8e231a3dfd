package config

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// evalString evaluates one expression in a context built for cfg.
func evalString(t *testing.T, ctx *hcl.EvalContext, src string) (cty.Value, hcl.Diagnostics) {
	t.Helper()
	expr, diags := hclsyntax.ParseExpression([]byte(src), "test.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatalf("parse %q: %s", src, diags)
	}
	return expr.Value(ctx)
}

func TestFunctions(t *testing.T) {
	cfg := loadString(t, "")
	ctx, diags := cfg.EvalContext(&Scope{FS: fstest.MapFS{}})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	tests := []struct {
		expr string
		want cty.Value
	}{
		{`upper("abc")`, cty.StringVal("ABC")},
		{`lower("ABC")`, cty.StringVal("abc")},
		{`trimspace("  x \n")`, cty.StringVal("x")},
		{`replace("a-b-c", "-", "/")`, cty.StringVal("a/b/c")},
		{`format("%s=%d", "n", 3)`, cty.StringVal("n=3")},
		{`join(",", ["a", "b"])`, cty.StringVal("a,b")},
		{`split(",", "a,b")`, cty.ListVal([]cty.Value{cty.StringVal("a"), cty.StringVal("b")})},
		{`length("héllo")`, cty.NumberIntVal(5)},
		{`length(["a", "b"])`, cty.NumberIntVal(2)},
		{`length({ a = 1 })`, cty.NumberIntVal(1)},
		{`concat(["a"], ["b"])`, cty.TupleVal([]cty.Value{cty.StringVal("a"), cty.StringVal("b")})},
		{`contains(["a", "b"], "b")`, cty.True},
		{`merge({ a = 1 }, { b = 2 })`, cty.ObjectVal(map[string]cty.Value{"a": cty.NumberIntVal(1), "b": cty.NumberIntVal(2)})},
		{`keys({ b = 1, a = 2 })`, cty.TupleVal([]cty.Value{cty.StringVal("a"), cty.StringVal("b")})},
		{`lookup({ a = "x" }, "b", "fallback")`, cty.StringVal("fallback")},
		{`element(["a", "b"], 3)`, cty.StringVal("b")},
		{`coalesce(null, "x")`, cty.StringVal("x")},
		{`min(3, 1, 2)`, cty.NumberIntVal(1)},
		{`max(3, 1, 2)`, cty.NumberIntVal(3)},
		{`abs(-2)`, cty.NumberIntVal(2)},
		{`ceil(1.2)`, cty.NumberIntVal(2)},
		{`floor(1.8)`, cty.NumberIntVal(1)},
		{`jsonencode({ a = [1, "x"] })`, cty.StringVal(`{"a":[1,"x"]}`)},
		{`jsondecode("{\"a\": true}").a`, cty.True},
		{`base64encode("kew")`, cty.StringVal("a2V3")},
		{`base64decode("a2V3")`, cty.StringVal("kew")},
		{`sha256("kew")`, cty.StringVal(sha256Hex("kew"))},
		{`startswith("kew/fix", "kew/")`, cty.True},
		{`endswith("a.md", ".txt")`, cty.False},
		{`strcontains("abc", "b")`, cty.True},
		{`tostring(5)`, cty.StringVal("5")},
		{`try(jsondecode("{"), "fallback")`, cty.StringVal("fallback")},
		{`can(jsondecode("{"))`, cty.False},
	}
	for _, tc := range tests {
		t.Run(tc.expr, func(t *testing.T) {
			got, diags := evalString(t, ctx, tc.expr)
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			if !got.RawEquals(tc.want) {
				t.Errorf("%s = %#v, want %#v", tc.expr, got, tc.want)
			}
		})
	}
	for _, name := range []string{"env", "timestamp", "uuid"} {
		if _, ok := ctx.Functions[name]; ok {
			t.Errorf("function %s() is available; it must not be", name)
		}
	}
	if diff := cmp.Diff(slices.Sorted(maps.Keys(ctx.Functions)), FunctionNames()); diff != "" {
		t.Errorf("FunctionNames() disagrees with the table (-want +got):\n%s", diff)
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestFileFunctions(t *testing.T) {
	fsys := fstest.MapFS{
		"prompts/fix.md":     {Data: []byte("Fix it.\n")},
		"prompts/review.tpl": {Data: []byte("Review ${commit}%{ if strict } strictly%{ endif }.")},
		"prompts/upper.tpl":  {Data: []byte("${upper(name)}")},
		"prompts/nested.tpl": {Data: []byte(`${templatefile("prompts/fix.md", {})}`)},
		"big.md":             {Data: []byte(strings.Repeat("a", MaxFileBytes+1))},
		"exact.md":           {Data: []byte(strings.Repeat("a", MaxFileBytes))},
		"nul.md":             {Data: []byte("a\x00b")},
		"dir/x.md":           {Data: []byte("x")},
	}
	cfg := loadString(t, "node \"fix\" {\n  runner = \"pi\"\n  repo = \"r\"\n  prompt = \"p\"\n}\n")
	reads := &ReadLog{}
	ctx, _ := cfg.EvalContext(&Scope{FS: fsys, Reads: reads})
	ok := []struct {
		expr string
		want cty.Value
	}{
		{`file("prompts/fix.md")`, cty.StringVal("Fix it.\n")},
		{`file("./prompts/../prompts/fix.md")`, cty.StringVal("Fix it.\n")},
		{`templatefile("prompts/review.tpl", { commit = "abc", strict = true })`, cty.StringVal("Review abc strictly.")},
		{`templatefile("prompts/upper.tpl", { name = "kew" })`, cty.StringVal("KEW")},
		{`templatefile("prompts/review.tpl", { commit = node.fix.commit, strict = false })`, cty.UnknownVal(cty.String)},
		{`length(file("exact.md"))`, cty.NumberIntVal(MaxFileBytes)},
	}
	for _, tc := range ok {
		got, diags := evalString(t, ctx, tc.expr)
		if diags.HasErrors() {
			t.Errorf("%s: %s", tc.expr, diags)
			continue
		}
		if !got.RawEquals(tc.want) && !(tc.want.IsKnown() == false && !got.IsKnown()) {
			t.Errorf("%s = %#v, want %#v", tc.expr, got, tc.want)
		}
	}
	wantReads := map[string]string{
		"prompts/fix.md":     sha256Hex("Fix it.\n"),
		"prompts/review.tpl": sha256Hex("Review ${commit}%{ if strict } strictly%{ endif }."),
		"prompts/upper.tpl":  sha256Hex("${upper(name)}"),
		"exact.md":           sha256Hex(strings.Repeat("a", MaxFileBytes)),
	}
	if diff := cmp.Diff(wantReads, reads.Files); diff != "" {
		t.Errorf("Reads mismatch (-want +got):\n%s", diff)
	}

	bad := []struct{ expr, detail string }{
		{`file("missing.md")`, "no file missing.md exists"},
		{`file("dir")`, "dir is a directory"},
		{`file("big.md")`, "over the 1 MiB limit"},
		{`file("nul.md")`, "binary file"},
		{`file("../secret")`, "leaves the configuration's directory"},
		{`file("prompts/../../secret")`, "leaves the configuration's directory"},
		{`file("/etc/passwd")`, "absolute path"},
		{`file("")`, "the path is empty"},
		{`templatefile("prompts/review.tpl", { commit = "abc" })`, `refers to "strict"`},
		{`templatefile("prompts/review.tpl", "x")`, "must be an object"},
		{`templatefile("prompts/nested.tpl", {})`, "templatefile"},
		{`templatefile("big.md", {})`, "over the 1 MiB limit"},
	}
	for _, tc := range bad {
		_, diags := evalString(t, ctx, tc.expr)
		if !diags.HasErrors() {
			t.Errorf("%s: no error", tc.expr)
			continue
		}
		if !strings.Contains(diags[0].Detail, tc.detail) {
			t.Errorf("%s: detail %q lacks %q", tc.expr, diags[0].Detail, tc.detail)
		}
		if diags[0].Subject == nil {
			t.Errorf("%s: diagnostic without a range", tc.expr)
		}
	}
}

// TestDirFSRefusesEscapingLinks: a link inside the configuration's directory that leads out of it must not
// let file() read the reviewer's files.
func TestDirFSRefusesEscapingLinks(t *testing.T) {
	outside := t.TempDir()
	writeFile(t, outside, "secret", "s3cret")
	dir := t.TempDir()
	writeFile(t, dir, "inside.md", "fine")
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "link.md")); err != nil {
		t.Skipf("cannot create symlinks here: %v", err)
	}
	if err := os.Symlink("inside.md", filepath.Join(dir, "ok-link.md")); err != nil {
		t.Fatal(err)
	}
	cfg := loadString(t, "")
	ctx, _ := cfg.EvalContext(&Scope{FS: DirFS(dir)})
	if v, diags := evalString(t, ctx, `file("ok-link.md")`); diags.HasErrors() || v.AsString() != "fine" {
		t.Errorf(`file("ok-link.md") = %#v, %s`, v, diags)
	}
	_, diags := evalString(t, ctx, `file("link.md")`)
	if !diags.HasErrors() || !strings.Contains(diags[0].Detail, "outside the configuration's directory") {
		t.Errorf(`file("link.md"): %s`, diags)
	}
	if strings.Contains(diags.Error(), "s3cret") {
		t.Error("the secret leaked into a diagnostic")
	}
}

func TestEvalContext(t *testing.T) {
	cfg := loadString(t, `
variable "name" {
  default = "kew"
}
locals {
  c = "${local.b}-c"
  b = "${local.a}-b"
  a = upper(var.name)
  commit = node.fix.commit
}
node "fix" {
  runner = "claude-code"
  repo   = "r"
  prompt = "p"
}
node "review" {
  runner = "claude-code"
  role   = "reviewer"
  repo   = "r"
  ref    = local.commit
  prompt = "Review ${node.fix.commit} on ${node.fix.branch}."
  pull_request {
    base  = "main"
    title = "Review of ${node.fix.commit}"
  }
}
`)
	if deps := cfg.Nodes["review"].DependsOn; len(deps) != 1 || deps[0].Name != "fix" || deps[0].Explicit {
		t.Errorf("review.DependsOn = %+v, want fix through local.commit", deps)
	}

	ctx, diags := cfg.EvalContext(&Scope{Vars: map[string]cty.Value{"name": cty.StringVal("plan")}})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if v, _ := evalString(t, ctx, "local.c"); v.AsString() != "PLAN-b-c" {
		t.Errorf("local.c = %#v", v)
	}
	nv, diags := EvalNode(cfg.Nodes["review"], ctx)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	want := &NodeValues{Runner: "claude-code", Role: RoleReviewer, Repo: "r", Branch: "kew/review",
		Timeout: DefaultTimeout, PullRequest: &PullRequestValues{Base: "main"}, Unknown: []string{"ref", "prompt", "pull_request.title"}}
	if diff := cmp.Diff(want, nv); diff != "" {
		t.Errorf("EvalNode() at plan mismatch (-want +got):\n%s", diff)
	}

	// At apply, fix's outputs are known.
	ctx, _ = cfg.EvalContext(&Scope{Outputs: map[string]map[string]cty.Value{
		"fix": {"commit": cty.StringVal("abc123"), "branch": cty.StringVal("kew/fix")},
	}})
	nv, diags = EvalNode(cfg.Nodes["review"], ctx)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	want.Ref, want.Prompt, want.PullRequest.Title, want.Unknown = "abc123", "Review abc123 on kew/fix.", "Review of abc123", nil
	if diff := cmp.Diff(want, nv); diff != "" {
		t.Errorf("EvalNode() at apply mismatch (-want +got):\n%s", diff)
	}
	if v, _ := evalString(t, ctx, "var.name"); v.IsKnown() {
		t.Errorf("var.name without a value = %#v, want unknown", v)
	}
}

func TestEvalRunnerArgs(t *testing.T) {
	cfg := loadString(t, `
variable "effort" {
  default = "high"
}
locals {
  common = ["--json"]
}
runner "acme" {
  protocol    = "claude-code"
  credentials = ["ACME_KEY", "ACME_ORG"]
  args        = concat(local.common, ["--model", model, "--effort", var.effort])
}
runner "pi" {
  credentials = []
}
`)
	r := cfg.Runners["acme"]
	if diff := cmp.Diff([]string{"ACME_KEY", "ACME_ORG"}, r.Credentials); diff != "" {
		t.Errorf("Credentials mismatch (-want +got):\n%s", diff)
	}
	if len(r.CredentialRanges) != 2 || r.CredentialRanges[1].Start.Column != 30 {
		t.Errorf("CredentialRanges = %v", r.CredentialRanges)
	}
	if p := cfg.Runners["pi"]; p.Credentials == nil || len(p.Credentials) != 0 || p.Protocol != "" || p.Args != nil {
		t.Errorf("override runner = %+v, want empty credentials, no protocol, no args", p)
	}
	ctx, _ := cfg.EvalContext(&Scope{Vars: map[string]cty.Value{"effort": cty.StringVal("low")}})
	args, diags := EvalRunnerArgs(r, ctx, "claude-opus-4-1")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if diff := cmp.Diff([]string{"--json", "--model", "claude-opus-4-1", "--effort", "low"}, args); diff != "" {
		t.Errorf("EvalRunnerArgs() mismatch (-want +got):\n%s", diff)
	}
	if args, diags := EvalRunnerArgs(cfg.Runners["pi"], ctx, "m"); args != nil || diags != nil {
		t.Errorf("EvalRunnerArgs without args = %v, %v", args, diags)
	}
	ctx, _ = cfg.EvalContext(&Scope{})
	if _, diags := EvalRunnerArgs(r, ctx, "m"); !diags.HasErrors() || diags[0].Summary != "Unknown runner arguments" {
		t.Errorf("EvalRunnerArgs with an unknown variable: %s", diags)
	}
}
