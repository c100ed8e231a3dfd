package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// TestFastContent: where fastContent decodes a body, its content is PartialContent's, attribute for attribute
// and block for block; where it declines, PartialContent has something to say.
func TestFastContent(t *testing.T) {
	schema := &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "a"}, {Name: "b"}, {Name: "req", Required: true}},
		Blocks:     []hcl.BlockHeaderSchema{{Type: "plain"}, {Type: "named", LabelNames: []string{"name"}}},
	}
	for src, wantOK := range map[string]bool{
		"req = 1\n":                       true,
		"req = 1\na = \"x\"\nb = var.y\n": true,
		"req = 1\nplain {\n}\nnamed \"n\" {\n  z = 1\n}\nplain {\n}\n": true,
		"a = 1\n":                     false, // req missing
		"req = 1\nc = 2\n":            false, // c unknown
		"req = 1\nother {\n}\n":       false, // block type unknown
		"req = 1\nnamed {\n}\n":       false, // label missing
		"req = 1\nplain \"x\" {\n}\n": false, // label extra
		"req = 1\nplain = 3\n":        false, // a block type written as an argument
	} {
		f, diags := hclsyntax.ParseConfig([]byte(src), "t.hcl", hcl.InitialPos)
		if diags.HasErrors() {
			t.Fatalf("%q: %s", src, diags)
		}
		syn := f.Body.(*hclsyntax.Body)
		got, ok := fastContent(syn, schema)
		if ok != wantOK {
			t.Errorf("%q: fastContent ok = %v, want %v", src, ok, wantOK)
			continue
		}
		want, _, wantDiags := syn.PartialContent(schema)
		if !ok {
			if !wantDiags.HasErrors() && len(want.Attributes) == len(syn.Attributes) && len(want.Blocks) == len(syn.Blocks) {
				t.Errorf("%q: fastContent declined a body PartialContent decodes in full without a word", src)
			}
			continue
		}
		if len(wantDiags) > 0 {
			t.Errorf("%q: fastContent decoded a body PartialContent has diagnostics for: %s", src, wantDiags)
		}
		if len(got.Attributes) != len(want.Attributes) {
			t.Errorf("%q: %d attributes, want %d", src, len(got.Attributes), len(want.Attributes))
		}
		for name, w := range want.Attributes {
			if g := got.Attributes[name]; g == nil || *g != *w {
				t.Errorf("%q: attribute %s = %+v, want %+v", src, name, g, w)
			}
		}
		if len(got.Blocks) != len(want.Blocks) {
			t.Fatalf("%q: %d blocks, want %d", src, len(got.Blocks), len(want.Blocks))
		}
		for i, w := range want.Blocks {
			g := got.Blocks[i]
			if g.Type != w.Type || g.Body != w.Body || g.DefRange != w.DefRange || !cmp.Equal(g.Labels, w.Labels) || !cmp.Equal(g.LabelRanges, w.LabelRanges) {
				t.Errorf("%q: block %d = %+v, want %+v", src, i, g, w)
			}
		}
		if got.MissingItemRange != want.MissingItemRange {
			t.Errorf("%q: MissingItemRange = %v, want %v", src, got.MissingItemRange, want.MissingItemRange)
		}
	}
}
