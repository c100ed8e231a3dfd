package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

func TestInstanceSlug(t *testing.T) {
	tests := []struct {
		name string
		key  cty.Value
		want string
	}{
		{"fix", cty.NilVal, "fix"},
		{"fix", cty.StringVal("api"), "fix-api"},
		{"fix", cty.StringVal("my_api2"), "fix-my_api2"},
		{"shard", cty.NumberIntVal(2), "shard-2"},
		{"fix", cty.StringVal("API"), "fix-api-" + keyHash("fix", "API")},
		{"fix", cty.StringVal("Billing Service"), "fix-billing-service-" + keyHash("fix", "Billing Service")},
		{"fix", cty.StringVal("../../etc"), "fix-etc-" + keyHash("fix", "../../etc")},
		{"fix", cty.StringVal("\x1b[31m"), "fix-31m-" + keyHash("fix", "\x1b[31m")},
		{"fix", cty.StringVal(""), "fix-" + keyHash("fix", "")},
		{"fix", cty.StringVal("ü"), "fix-" + keyHash("fix", "ü")},
	}
	for _, tt := range tests {
		if got := InstanceSlug(tt.name, tt.key); got != tt.want {
			t.Errorf("InstanceSlug(%q, %#v) = %q, want %q", tt.name, tt.key, got, tt.want)
		}
	}
	// Keys that escape alike keep distinct names; every slug fits a node name's rules and length.
	seen := map[string]string{}
	for _, k := range []string{"a b", "a-b", "a.b", "A B", "a/b", strings.Repeat("x", 200), strings.Repeat("x", 201)} {
		s := InstanceSlug("fix", cty.StringVal(k))
		if prev, ok := seen[s]; ok {
			t.Errorf("keys %q and %q share the slug %q", prev, k, s)
		}
		seen[s] = k
		if !namePattern.MatchString(s) || len(s) > maxNameLength {
			t.Errorf("slug %q of key %q is not a valid node name", s, k)
		}
	}
}

func TestParseInstanceAddress(t *testing.T) {
	tests := []struct {
		in      string
		name    string
		key     cty.Value
		wantErr bool
	}{
		{in: "fix", name: "fix", key: cty.NilVal},
		{in: `fix["api"]`, name: "fix", key: cty.StringVal("api")},
		{in: `fix["Billing \"Service\""]`, name: "fix", key: cty.StringVal(`Billing "Service"`)},
		{in: "shard[2]", name: "shard", key: cty.NumberIntVal(2)},
		{in: "fix[api]", wantErr: true},
		{in: `fix["api"`, wantErr: true},
		{in: "shard[-1]", wantErr: true},
	}
	for _, tt := range tests {
		name, key, err := ParseInstanceAddress(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseInstanceAddress(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		if tt.wantErr {
			continue
		}
		if name != tt.name || !(key == tt.key || (key != cty.NilVal && tt.key != cty.NilVal && key.RawEquals(tt.key))) {
			t.Errorf("ParseInstanceAddress(%q) = %q, %#v; want %q, %#v", tt.in, name, key, tt.name, tt.key)
		}
		// The planner's addresses read back as themselves.
		if got := InstanceAddress(name, key); got != tt.in {
			t.Errorf("InstanceAddress(ParseInstanceAddress(%q)) = %q", tt.in, got)
		}
	}
}

func TestEvalExpansion(t *testing.T) {
	expr := func(src string) hcl.Expression {
		e, diags := hclsyntax.ParseExpression([]byte(src), "test.hcl", hcl.InitialPos)
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		return e
	}
	ctx := &hcl.EvalContext{Variables: map[string]cty.Value{"var": cty.ObjectVal(map[string]cty.Value{
		"secret": cty.SetVal([]cty.Value{cty.StringVal("a")}).Mark("sensitive"),
		"map":    cty.MapVal(map[string]cty.Value{"b": cty.NumberIntVal(2), "a": cty.NumberIntVal(1)}),
		"later":  cty.UnknownVal(cty.Set(cty.String)),
	})}}
	tests := []struct {
		name    string
		forEach string
		count   string
		want    []string
		wantErr string
	}{
		{name: "set", forEach: `toset(["web", "api"])`, want: []string{`n["api"]`, `n["web"]`}},
		{name: "map", forEach: `var.map`, want: []string{`n["a"]`, `n["b"]`}},
		{name: "object", forEach: `{ b = "x", a = 1 }`, want: []string{`n["a"]`, `n["b"]`}},
		{name: "empty", forEach: `{}`, want: []string{}},
		{name: "count", count: `3`, want: []string{"n[0]", "n[1]", "n[2]"}},
		{name: "zero", count: `0`, want: []string{}},
		{name: "sensitive", forEach: `var.secret`, wantErr: "Sensitive values"},
		{name: "list", forEach: `["a"]`, wantErr: "convert it with toset()"},
		{name: "string", forEach: `"a"`, wantErr: "you have provided a value of type string"},
		{name: "unknown", forEach: `var.later`, wantErr: "The for_each value depends on values that cannot be determined until apply"},
		{name: "unknown count", count: `length(var.later)`, wantErr: "The count value depends on values that cannot be determined until apply"},
		{name: "negative", count: `-2`, wantErr: "greater than or equal to zero"},
		{name: "fraction", count: `0.5`, wantErr: "not a whole number"},
		{name: "null count", count: `null`, wantErr: "An integer is required"},
		{name: "too many", count: `1000001`, wantErr: "at most 100000 instances"},
	}
	funcs := stdlibFunctions()
	ctx.Functions = funcs
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := &Node{Name: "n"}
			if tt.forEach != "" {
				n.ForEach = expr(tt.forEach)
			} else {
				n.Count = expr(tt.count)
			}
			insts, diags := EvalExpansion(n, ctx)
			if tt.wantErr != "" {
				if !diags.HasErrors() || !strings.Contains(diags[0].Detail, tt.wantErr) {
					t.Fatalf("EvalExpansion() = %v, want an error with %q", diags, tt.wantErr)
				}
				if diags[0].Subject == nil || diags[0].Subject.Start.Line != 1 {
					t.Errorf("diagnostic has no file:line: %#v", diags[0].Subject)
				}
				return
			}
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			got := []string{}
			for _, in := range insts {
				got = append(got, in.Address)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("EvalExpansion() addresses mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
