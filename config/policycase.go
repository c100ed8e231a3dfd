package config

import (
	"fmt"
	"path/filepath"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/kewplan/kewplan/internal/safefile"
)

// PolicyTestSuffix names the files `kewplan policy test DIR` runs, one case each.
const PolicyTestSuffix = ".policytest.hcl"

// PolicyTestCase is one *.policytest.hcl file: a configuration (or saved plan) to plan, optionally a base plan
// for change, the policy file to judge it with, and the rules expected to match at each level. Paths are as
// written and, in the *Path fields, relative to the directory of the case file (or absolute), for opening.
type PolicyTestCase struct {
	File              string
	Configuration     string
	ConfigurationPath string
	Base              string // "" when not written
	BasePath          string
	Policy            string // "" when not written: the policy.hcl beside the case file
	PolicyPath        string
	// Expect holds, for each level written in the expect block, the rule names expected to match at it; a
	// level the block does not write is not checked.
	Expect      map[string][]string
	ExpectRange hcl.Range
}

var policyTestSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "configuration", Required: true},
		{Name: "base"},
		{Name: "policy"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "expect"}},
}

var policyExpectSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: RuleLevelDeny}, {Name: RuleLevelReview}, {Name: RuleLevelWarn}},
}

// LoadPolicyTestCase reads one *.policytest.hcl file. Its values are literals, as a policy's are.
func LoadPolicyTestCase(path string) (*PolicyTestCase, map[string][]byte, hcl.Diagnostics) {
	src, err := safefile.Read(path, MaxPolicyFileBytes)
	if err != nil {
		return nil, nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Cannot read policy test",
			Detail:   fmt.Sprintf("Reading the policy test %s failed: %s.", path, describeFSError(err)),
		}}
	}
	files := map[string][]byte{path: src}
	if d := CheckNesting(path, src); d != nil {
		return nil, files, hcl.Diagnostics{d}
	}
	file, diags := hclsyntax.ParseConfig(src, path, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, files, diags
	}
	content, moreDiags := bodyContent(file.Body, policyTestSchema, "a policy test")
	diags = append(diags, moreDiags...)
	dir := filepath.Dir(path)
	tc := &PolicyTestCase{File: path}
	relative := func(s string) string {
		p := filepath.FromSlash(s)
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		return p
	}
	str := func(name string) (string, bool) {
		attr, ok := content.Attributes[name]
		if !ok {
			return "", false
		}
		v, ok := policyLiteral(attr, cty.String, &diags)
		if !ok {
			return "", false
		}
		if v.AsString() == "" {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Empty path in policy test",
				Detail:  fmt.Sprintf("%s names a file relative to this policy test; it cannot be empty.", name),
				Subject: attr.Expr.Range().Ptr()})
			return "", false
		}
		return v.AsString(), true
	}
	if s, ok := str("configuration"); ok {
		tc.Configuration, tc.ConfigurationPath = s, relative(s)
	}
	if s, ok := str("base"); ok {
		tc.Base, tc.BasePath = s, relative(s)
	}
	tc.PolicyPath = filepath.Join(dir, "policy.hcl")
	if s, ok := str("policy"); ok {
		tc.Policy, tc.PolicyPath = s, relative(s)
	}
	tc.Expect = map[string][]string{}
	var expect *hcl.Block
	for _, b := range content.Blocks {
		if expect != nil {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate expect block",
				Detail:  "A policy test has one expect block: merge the two.",
				Subject: b.DefRange.Ptr()})
			continue
		}
		expect = b
	}
	if expect == nil {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Missing expect block",
			Detail:  "A policy test says what it expects, for example:\n\nexpect {\n  deny   = [\"opus-fan-out\"]\n  review = []\n  warn   = []\n}",
			Subject: &hcl.Range{Filename: path, Start: hcl.InitialPos, End: hcl.InitialPos}})
		return tc, files, diags
	}
	tc.ExpectRange = expect.DefRange
	ec, moreDiags := bodyContent(expect.Body, policyExpectSchema, "an expect block")
	diags = append(diags, moreDiags...)
	for _, level := range RuleLevels {
		attr, ok := ec.Attributes[level]
		if !ok {
			continue
		}
		elems, ok := policyListElems(level, attr.Expr, &diags)
		if !ok {
			continue
		}
		names := []string{}
		for _, e := range elems {
			if v, ok := policyLiteralExpr(level, e, cty.String, &diags); ok {
				names = append(names, v.AsString())
			}
		}
		tc.Expect[level] = names
	}
	return tc, files, diags
}
