package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// loadString loads src as the only file of a fresh configuration directory.
func loadString(t *testing.T, src string) *Config {
	t.Helper()
	dir := t.TempDir()
	f := filepath.Join(dir, "main.hcl")
	if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := Load(f)
	if diags.HasErrors() {
		t.Fatalf("Load: %s", diags)
	}
	return cfg
}

func writeFile(t *testing.T, dir, name, src string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const precedenceConfig = `
variable "a" {
  default = "default"
}
variable "b" {
  default = "default"
}
variable "c" {
  default = "default"
}
variable "d" {
  default = "default"
}
variable "e" {
  default = "default"
}
`

// TestVariablePrecedence checks Terraform's order: default < KEWPLAN_VAR_ < --var-file (in order) < --var (in
// order).
func TestVariablePrecedence(t *testing.T) {
	cfg := loadString(t, precedenceConfig)
	dir := t.TempDir()
	f1 := writeFile(t, dir, "one.hcl", "b = \"file1\"\nc = \"file1\"\nd = \"file1\"\n")
	f2 := writeFile(t, dir, "two.hcl", "c = \"file2\"\n")
	vals, diags := cfg.ResolveVariables(VariableInputs{
		Env:      []string{"KEWPLAN_VAR_b=env", "KEWPLAN_VAR_e=env", "KEWPLAN_VAR_undeclared=ignored", "HOME=/root", "KEWPLAN_VAR_d=env"},
		VarFiles: []string{f1, f2},
		Vars:     []string{"d=flag1", "d=flag2"},
	})
	if len(diags) > 0 {
		t.Fatalf("ResolveVariables: %s", diags)
	}
	want := map[string]string{"a": "default", "b": "file1", "c": "file2", "d": "flag2", "e": "env"}
	got := map[string]string{}
	for k, v := range vals {
		got[k] = v.AsString()
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ResolveVariables() mismatch (-want +got):\n%s", diff)
	}
	if _, ok := cfg.VarFiles[f1]; !ok {
		t.Errorf("VarFiles lacks %s", f1)
	}
}

func TestVariableConversion(t *testing.T) {
	cfg := loadString(t, `
variable "s" {
  type = string
}
variable "untyped" {
}
variable "n" {
  type = number
}
variable "b" {
  type = bool
}
variable "l" {
  type = list(string)
}
variable "m" {
  type    = map(number)
  default = { x = 1 }
}
`)
	vals, diags := cfg.ResolveVariables(VariableInputs{
		Env:  []string{"KEWPLAN_VAR_n=42"},
		Vars: []string{`s=["not", "parsed"]`, "untyped=1 + 1", "b=true", `l=["a", "b"]`, "m={ y = 2 }"},
	})
	if len(diags) > 0 {
		t.Fatalf("ResolveVariables: %s", diags)
	}
	want := map[string]cty.Value{
		"s":       cty.StringVal(`["not", "parsed"]`),
		"untyped": cty.StringVal("1 + 1"),
		"n":       cty.NumberIntVal(42),
		"b":       cty.True,
		"l":       cty.ListVal([]cty.Value{cty.StringVal("a"), cty.StringVal("b")}),
		"m":       cty.MapVal(map[string]cty.Value{"y": cty.NumberIntVal(2)}),
	}
	for name, w := range want {
		if !vals[name].RawEquals(w) {
			t.Errorf("var.%s = %#v, want %#v", name, vals[name], w)
		}
	}
}

func TestVariableErrors(t *testing.T) {
	const cfgSrc = `
variable "model" {
  type = string
  validation {
    condition     = startswith(var.model, "claude-")
    error_message = "The model must be a Claude model."
  }
}
variable "n" {
  type    = number
  default = 1
}
`
	tests := []struct {
		name    string
		in      VariableInputs
		varFile string
		want    []string // "severity summary", in order
		detail  string   // a substring of the first diagnostic's detail
	}{
		{
			name:   "required",
			in:     VariableInputs{},
			want:   []string{"error No value for required variable"},
			detail: "Set it with --var model=VALUE, in a --var-file, or with the environment variable KEWPLAN_VAR_model.",
		},
		{
			name:   "undeclared flag",
			in:     VariableInputs{Vars: []string{"model=claude-x", "modle=x"}},
			want:   []string{"error Value for undeclared variable"},
			detail: `Did you mean "model"?`,
		},
		{
			name:   "malformed flag",
			in:     VariableInputs{Vars: []string{"model=claude-x", "model"}},
			want:   []string{"error Invalid --var option"},
			detail: "--var name=value",
		},
		{
			name: "undeclared env is ignored",
			in:   VariableInputs{Env: []string{"KEWPLAN_VAR_model=claude-x", "KEWPLAN_VAR_other=1"}},
			want: nil,
		},
		{
			name:   "validation",
			in:     VariableInputs{Vars: []string{"model=gpt-5"}},
			want:   []string{"error Invalid value for variable"},
			detail: "The model must be a Claude model.",
		},
		{
			name:   "not a number",
			in:     VariableInputs{Vars: []string{"model=claude-x", "n=many"}},
			want:   []string{"error Invalid value for variable"},
			detail: "not a valid number value",
		},
		{
			name:    "var file undeclared is a warning",
			in:      VariableInputs{Vars: []string{"model=claude-x"}},
			varFile: "other = 1\n",
			want:    []string{"warning Value for undeclared variable"},
		},
		{
			name:    "var file wrong type",
			in:      VariableInputs{},
			varFile: "model = \"claude-x\"\nn = [1]\n",
			want:    []string{"error Invalid value for variable"},
			detail:  "does not match its type number",
		},
		{
			name:    "var file reference",
			in:      VariableInputs{},
			varFile: "model = var.other\n",
			want:    []string{"error Variable value must be constant"},
		},
		{
			name:    "var file syntax",
			in:      VariableInputs{},
			varFile: "model = \n",
			want:    []string{"error Invalid expression"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := loadString(t, cfgSrc)
			in := tc.in
			if tc.varFile != "" {
				in.VarFiles = []string{writeFile(t, t.TempDir(), "vars.hcl", tc.varFile)}
			}
			_, diags := cfg.ResolveVariables(in)
			var got []string
			for _, d := range diags {
				sev := "error"
				if d.Severity == hcl.DiagWarning {
					sev = "warning"
				}
				got = append(got, sev+" "+d.Summary)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("ResolveVariables() mismatch (-want +got):\n%s\n%s", diff, diags)
			}
			if tc.detail != "" && !strings.Contains(diags[0].Detail, tc.detail) {
				t.Errorf("detail %q lacks %q", diags[0].Detail, tc.detail)
			}
		})
	}
}

func TestVariableFileMissing(t *testing.T) {
	cfg := loadString(t, precedenceConfig)
	_, diags := cfg.ResolveVariables(VariableInputs{VarFiles: []string{"no/such/file.hcl"}})
	if len(diags) != 1 || diags[0].Summary != "Cannot read variable file" || !strings.Contains(diags[0].Detail, "no/such/file.hcl") {
		t.Errorf("diags = %s", diags)
	}
}
