package config

import (
	"bytes"
	"fmt"
	"math/big"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"golang.org/x/text/unicode/norm"

	"github.com/kewplan/kewplan/internal/parallel"
)

// rootSchema is the top level of a configuration file.
var rootSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "variable", LabelNames: []string{"name"}},
		{Type: "locals"},
		{Type: "sandbox"},
		{Type: "runner", LabelNames: []string{"name"}},
		{Type: "node", LabelNames: []string{"name"}},
		{Type: "policy"},
		{Type: "budget"},
		{Type: "pricing", LabelNames: []string{"model"}},
		{Type: "engine", LabelNames: []string{"name"}},
	},
}

// namePattern is what node and runner names must match: a node name becomes part of a container name
// ("kew-<node>") and a label value, so it is restricted to what Docker accepts there.
var namePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]*$`)

// maxNameLength keeps "kew-<node>" within a DNS label, which Docker uses as the container's hostname.
const maxNameLength = 59

// decodeFile decodes one file's body into c, reporting duplicates against what earlier files declared.
func (c *Config) decodeFile(body hcl.Body) hcl.Diagnostics {
	content, diags := bodyContent(body, rootSchema, "the top level of a configuration file")
	// Node blocks are most of a large configuration, and each decodes on its own: decode them side by side,
	// then register them below in file order, so that duplicates and diagnostics come out as from one pass.
	type decodedNode struct {
		n     *Node
		diags hcl.Diagnostics
	}
	nodes := make([]decodedNode, len(content.Blocks))
	parallel.For(len(content.Blocks), func(i int) {
		if b := content.Blocks[i]; b.Type == "node" {
			nodes[i].n, nodes[i].diags = decodeNodeBlock(b)
		}
	})
	for i, block := range content.Blocks {
		switch block.Type {
		case "variable":
			v, d := decodeVariableBlock(block)
			diags = append(diags, d...)
			if v == nil {
				c.rejected["var."+block.Labels[0]] = true
				continue
			}
			if prev, ok := c.Variables[v.Name]; ok {
				diags = append(diags, c.duplicateDiag("variable", v.Name, block, prev.DeclRange))
				continue
			}
			c.Variables[v.Name] = v
		case "locals":
			locals, d := decodeLocalsBlock(block)
			diags = append(diags, d...)
			for _, l := range locals {
				if prev, ok := c.Locals[l.Name]; ok {
					diags = append(diags, errorDiag("Duplicate local value",
						fmt.Sprintf("A local value named %q was already defined at %s. Local value names must be unique across all locals blocks of the configuration; rename or remove one of them.%s", l.Name, rangeString(prev.DeclRange), c.oneConfigurationNote(prev.DeclRange, l.DeclRange)),
						l.DeclRange))
					continue
				}
				c.Locals[l.Name] = l
			}
		case "sandbox":
			if c.Sandbox.DeclRange.Filename != "" {
				diags = append(diags, errorDiag("Duplicate sandbox block",
					fmt.Sprintf("A sandbox block was already written at %s. A configuration has at most one sandbox block; merge the two.%s", rangeString(c.Sandbox.DeclRange), c.oneConfigurationNote(c.Sandbox.DeclRange, block.DefRange)),
					block.DefRange))
				continue
			}
			sb, d := decodeSandboxBlock(block)
			diags = append(diags, d...)
			c.Sandbox = sb
		case "runner":
			r, d := decodeRunnerBlock(block)
			diags = append(diags, d...)
			if r == nil {
				continue
			}
			if prev, ok := c.Runners[r.Name]; ok {
				diags = append(diags, c.duplicateDiag("runner", r.Name, block, prev.DeclRange))
				continue
			}
			c.Runners[r.Name] = r
		case "node":
			n, d := nodes[i].n, nodes[i].diags
			diags = append(diags, d...)
			if n == nil {
				c.rejected["node."+block.Labels[0]] = true
				continue
			}
			if prev, ok := c.Nodes[n.Name]; ok {
				diags = append(diags, c.duplicateDiag("node", n.Name, block, prev.DeclRange))
				continue
			}
			c.Nodes[n.Name] = n
		case "engine":
			diags = append(diags, c.decodeEngine(block)...)
		case "policy":
			if c.Policy != nil {
				diags = append(diags, errorDiag("Duplicate policy block",
					fmt.Sprintf("A policy block was already written at %s. A configuration has at most one policy block; merge the two.", rangeString(c.Policy.DeclRange)),
					block.DefRange))
				continue
			}
			p, d := decodePolicyBlock(block)
			diags = append(diags, d...)
			if p != nil {
				c.Policy = p
			}
		case "budget":
			if c.Budget != nil {
				diags = append(diags, errorDiag("Duplicate budget block",
					fmt.Sprintf("A top-level budget block was already written at %s. A configuration has at most one; merge the two.", rangeString(c.Budget.DeclRange)),
					block.DefRange))
				continue
			}
			b, d := decodeApplyBudgetBlock(block)
			diags = append(diags, d...)
			c.Budget = b
		case "pricing":
			p, d := decodePricingBlock(block)
			diags = append(diags, d...)
			if p == nil {
				continue
			}
			if prev, ok := c.Pricing[p.Model]; ok {
				diags = append(diags, c.duplicateDiag("pricing", p.Model, block, prev.DeclRange))
				continue
			}
			c.Pricing[p.Model] = p
		}
	}
	return diags
}

func (c *Config) duplicateDiag(kind, name string, block *hcl.Block, prev hcl.Range) *hcl.Diagnostic {
	return errorDiag(fmt.Sprintf("Duplicate %s block", kind),
		fmt.Sprintf("A %s named %q was already declared at %s. Each %s name must be unique within the configuration; rename or remove one of the two blocks.%s", kind, name, rangeString(prev), kind, c.oneConfigurationNote(prev, block.DefRange)),
		block.LabelRanges[0])
}

// oneConfigurationNote explains a clash between two files of one directory: `kewplan plan examples/` reads every
// *.hcl file there as one configuration, which a user who meant a folder of separate examples does not expect.
func (c *Config) oneConfigurationNote(prev, cur hcl.Range) string {
	if prev.Filename == "" || prev.Filename == cur.Filename {
		return ""
	}
	return fmt.Sprintf("\n\nThe two blocks are in different files: every *%s file of the directory %s is read as one configuration. If the files are separate configurations, plan them one at a time, for example kewplan plan %s and kewplan plan %s.",
		FileExtension, c.Dir, c.SourcePath(prev.Filename), c.SourcePath(cur.Filename))
}

// rangeString renders a range as "file:line", the way diagnostics refer to another place.
func rangeString(r hcl.Range) string {
	return fmt.Sprintf("%s:%d", r.Filename, r.Start.Line)
}

// checkName reports a block label that cannot serve as a node or runner name.
func checkName(kind, name string, rng hcl.Range) *hcl.Diagnostic {
	switch {
	case !namePattern.MatchString(name):
		return errorDiag(fmt.Sprintf("Invalid %s name", kind),
			fmt.Sprintf("The %s name %q is not valid. A %s name starts with a letter and holds only letters, digits, underscores and dashes, because it becomes part of a container name; for example %q.", kind, name, kind, suggestName(name)),
			rng)
	case len(name) > maxNameLength:
		return errorDiag(fmt.Sprintf("Invalid %s name", kind),
			fmt.Sprintf("The %s name is %d characters long. A %s name is at most %d characters, so that its container's host name fits in a DNS label; shorten it.", kind, len(name), kind, maxNameLength),
			rng)
	}
	return nil
}

// latinFolds spells the Latin letters that do not decompose into a base letter and accents.
var latinFolds = map[rune]string{
	'ß': "ss", 'æ': "ae", 'Æ': "AE", 'ø': "o", 'Ø': "O", 'œ': "oe", 'Œ': "OE", 'đ': "d", 'Đ': "D",
	'ł': "l", 'Ł': "L", 'þ': "th", 'Þ': "TH", 'ð': "d", 'Ð': "D", 'ı': "i",
}

// suggestName turns an invalid name into a valid one for the fix hint: accented Latin letters lose their
// accents ("café" becomes "cafe"), and every other run of characters a name cannot hold becomes one dash.
func suggestName(name string) string {
	var folded []byte
	for _, r := range norm.NFD.String(name) {
		switch {
		case unicode.Is(unicode.Mn, r): // a combining accent, split off its letter by NFD
		case latinFolds[r] != "":
			folded = append(folded, latinFolds[r]...)
		case r < utf8.RuneSelf:
			folded = append(folded, byte(r))
		default:
			folded = append(folded, 0x80) // any other character: a separator
		}
	}
	out := make([]byte, 0, len(folded))
	for _, ch := range folded {
		switch {
		case ch >= 'a' && ch <= 'z', ch >= 'A' && ch <= 'Z':
			out = append(out, ch)
		case ch >= '0' && ch <= '9', ch == '_', ch == '-':
			if len(out) > 0 {
				out = append(out, ch)
			}
		default:
			if len(out) > 0 && out[len(out)-1] != '-' {
				out = append(out, '-')
			}
		}
	}
	out = bytes.TrimRight(out, "-")
	if len(out) == 0 {
		return "my-node"
	}
	return string(out)
}

// constValue evaluates an attribute that is decided when the configuration loads, before variables exist.
func constValue(attr *hcl.Attribute, where string) (cty.Value, hcl.Diagnostics) {
	if vars := attr.Expr.Variables(); len(vars) > 0 {
		return cty.DynamicVal, hcl.Diagnostics{errorDiag("Reference not allowed here",
			fmt.Sprintf("The %s argument of %s is decided when the configuration is loaded, before variables, locals and node outputs exist, so it cannot refer to %s. Write a literal value instead.", attr.Name, where, traversalString(vars[0])),
			vars[0].SourceRange())}
	}
	if hasFunctionCall(attr.Expr) {
		return cty.DynamicVal, hcl.Diagnostics{errorDiag("Function call not allowed here",
			fmt.Sprintf("The %s argument of %s is decided when the configuration is loaded, so it must be a literal value, not a function call.", attr.Name, where),
			attr.Expr.Range())}
	}
	v, diags := attr.Expr.Value(nil)
	return v, diags
}

func hasFunctionCall(expr hcl.Expression) bool {
	syn, ok := expr.(hclsyntax.Expression)
	if !ok {
		return false
	}
	found := false
	hclsyntax.VisitAll(syn, func(n hclsyntax.Node) hcl.Diagnostics {
		if _, ok := n.(*hclsyntax.FunctionCallExpr); ok {
			found = true
		}
		return nil
	})
	return found
}

// constString decodes a literal string attribute.
func constString(attr *hcl.Attribute, where string) (string, hcl.Diagnostics) {
	v, diags := constValue(attr, where)
	if diags.HasErrors() {
		return "", diags
	}
	s, d := asString(v, attr, where)
	return s, append(diags, d...)
}

// asString converts an evaluated attribute value to a Go string, reporting null and wrong types.
func asString(v cty.Value, attr *hcl.Attribute, where string) (string, hcl.Diagnostics) {
	if v.IsNull() {
		return "", hcl.Diagnostics{errorDiag("Missing value",
			fmt.Sprintf("The %s argument of %s is null. Give it a string value, or remove the argument to use the default.", attr.Name, where),
			attr.Expr.Range())}
	}
	sv, err := convert.Convert(v, cty.String)
	if err != nil {
		return "", hcl.Diagnostics{wrongTypeDiag(attr, where, "a string", v.Type())}
	}
	if !sv.IsKnown() {
		return "", nil
	}
	return sv.AsString(), nil
}

func wrongTypeDiag(attr *hcl.Attribute, where, want string, got cty.Type) *hcl.Diagnostic {
	return errorDiag("Wrong value type",
		fmt.Sprintf("The %s argument of %s must be %s, but this value is %s. Change the value to %s.", attr.Name, where, want, typeName(got), want),
		attr.Expr.Range())
}

// constStringList decodes a literal list of strings, returning each element's range.
func constStringList(attr *hcl.Attribute, where string) ([]string, []hcl.Range, hcl.Diagnostics) {
	exprs, diags := hcl.ExprList(attr.Expr)
	if diags.HasErrors() {
		return nil, nil, hcl.Diagnostics{errorDiag("Wrong value type",
			fmt.Sprintf("The %s argument of %s must be a list of strings written in brackets, for example %s = [\"A\", \"B\"].", attr.Name, where, attr.Name),
			attr.Expr.Range())}
	}
	list := make([]string, 0, len(exprs))
	ranges := make([]hcl.Range, 0, len(exprs))
	for _, e := range exprs {
		s, d := constString(&hcl.Attribute{Name: attr.Name, Expr: e, Range: e.Range(), NameRange: attr.NameRange}, where)
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		list = append(list, s)
		ranges = append(ranges, e.Range())
	}
	return list, ranges, diags
}

// constBool decodes a literal true or false.
func constBool(attr *hcl.Attribute, where string) (bool, hcl.Diagnostics) {
	v, diags := constValue(attr, where)
	if diags.HasErrors() {
		return false, diags
	}
	b, err := convert.Convert(v, cty.Bool)
	if err != nil || b.IsNull() || !b.IsKnown() {
		return false, hcl.Diagnostics{wrongTypeDiag(attr, where, "true or false", v.Type())}
	}
	return b.True(), nil
}

// constWholeNumber decodes a literal whole number.
func constWholeNumber(attr *hcl.Attribute, where string) (int64, hcl.Diagnostics) {
	v, diags := constValue(attr, where)
	if diags.HasErrors() {
		return 0, diags
	}
	nv, err := convert.Convert(v, cty.Number)
	if err != nil || nv.IsNull() {
		return 0, hcl.Diagnostics{wrongTypeDiag(attr, where, "a whole number", v.Type())}
	}
	bf := nv.AsBigFloat()
	n, acc := bf.Int64()
	if acc != big.Exact {
		return 0, hcl.Diagnostics{errorDiag("Invalid number",
			fmt.Sprintf("The %s argument of %s must be a whole number within 64 bits, but %s is not. Write a whole number.", attr.Name, where, bf.Text('f', -1)),
			attr.Expr.Range())}
	}
	return n, nil
}

// typeName names a value's type with its article: "a string", "an object".
func typeName(ty cty.Type) string {
	n := ty.FriendlyName()
	if strings.ContainsAny(n[:1], "aeiou") {
		return "an " + n
	}
	return "a " + n
}
