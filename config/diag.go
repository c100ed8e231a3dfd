package config

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// errorDiag builds an error diagnostic pointing at subject. A zero subject leaves the diagnostic without a range.
func errorDiag(summary, detail string, subject hcl.Range) *hcl.Diagnostic {
	d := &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail}
	if subject.Filename != "" {
		r := subject
		d.Subject = &r
	}
	return d
}

// warningDiag is errorDiag's warning twin.
func warningDiag(summary, detail string, subject hcl.Range) *hcl.Diagnostic {
	d := errorDiag(summary, detail, subject)
	d.Severity = hcl.DiagWarning
	return d
}

// didYouMean returns ` Did you mean "x"?` when one of options is close to given, else "".
func didYouMean(given string, options []string) string {
	best, bestDist := "", 3
	for _, o := range options {
		if d := editDistance(given, o); d < bestDist {
			best, bestDist = o, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" Did you mean %q?", best)
}

// quotedList renders names as `"a", "b" and "c"`.
func quotedList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	switch len(q) {
	case 0:
		return "nothing"
	case 1:
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " and " + q[len(q)-1]
}

// fastContent is what syn.PartialContent(schema) returns when every argument and block of syn is one the schema
// names, no argument is required and every block has the labels the schema names: the content alone, without
// the maps PartialContent builds for the body it also returns, which hides what it decoded from a later decode
// (a configuration's bodies are each decoded once, and bodyContent drops that body). ok is false in every
// other case, for PartialContent to decode and word. Those maps were a sixth of what decoding a large
// configuration allocated.
func fastContent(syn *hclsyntax.Body, schema *hcl.BodySchema) (*hcl.BodyContent, bool) {
	if len(syn.Attributes) > len(schema.Attributes) {
		return nil, false
	}
	attrs := make(hcl.Attributes, len(syn.Attributes))
	for _, s := range schema.Attributes {
		a, ok := syn.Attributes[s.Name]
		if !ok {
			if s.Required {
				return nil, false
			}
			continue
		}
		attrs[s.Name] = a.AsHCLAttribute()
	}
	if len(attrs) != len(syn.Attributes) {
		return nil, false
	}
	var blocks hcl.Blocks
	for _, b := range syn.Blocks {
		i := slices.IndexFunc(schema.Blocks, func(s hcl.BlockHeaderSchema) bool { return s.Type == b.Type })
		if i < 0 || len(b.Labels) != len(schema.Blocks[i].LabelNames) {
			return nil, false
		}
		blocks = append(blocks, b.AsHCLBlock())
	}
	return &hcl.BodyContent{Attributes: attrs, Blocks: blocks, MissingItemRange: syn.MissingItemRange()}, true
}

// bodyContent decodes body on schema like hcl.Body.Content, but words the diagnostics for an unsupported
// argument or block with the list of what the block accepts and a "did you mean" suggestion. where names the
// block for the reader, e.g. `a node block`.
func bodyContent(body hcl.Body, schema *hcl.BodySchema, where string) (*hcl.BodyContent, hcl.Diagnostics) {
	syn, ok := body.(*hclsyntax.Body)
	if !ok {
		return body.Content(schema)
	}
	if content, ok := fastContent(syn, schema); ok {
		return content, nil
	}
	content, _, diags := syn.PartialContent(schema)
	if len(content.Attributes) == len(syn.Attributes) && len(content.Blocks) == len(syn.Blocks) {
		return content, diags // every argument and block is one the schema knows
	}

	var attrNames, blockNames []string
	for _, a := range schema.Attributes {
		attrNames = append(attrNames, a.Name)
	}
	for _, b := range schema.Blocks {
		blockNames = append(blockNames, b.Type)
	}
	known := func(list []string, name string) bool {
		for _, n := range list {
			if n == name {
				return true
			}
		}
		return false
	}

	names := make([]string, 0, len(syn.Attributes))
	for name := range syn.Attributes {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if known(attrNames, name) {
			continue
		}
		attr := syn.Attributes[name]
		var detail string
		switch {
		case known(blockNames, name):
			detail = fmt.Sprintf("%q is a block, not an argument, in %s. Write it as %s { ... } without the equals sign.", name, where, name)
		case len(attrNames) == 0 && where == "the top level of a configuration file":
			detail = fmt.Sprintf("An argument named %q is not expected at %s, which holds only blocks (%s). If this file sets variable values, keep it outside the configuration directory and pass it with --var-file.", name, where, strings.Join(blockNames, ", "))
		case len(attrNames) == 0:
			detail = fmt.Sprintf("An argument named %q is not expected in %s, which takes no arguments.", name, where)
		default:
			var unset []string
			for _, n := range attrNames {
				if _, set := content.Attributes[n]; !set {
					unset = append(unset, n)
				}
			}
			detail = fmt.Sprintf("An argument named %q is not expected in %s.%s The arguments it accepts are %s.", name, where, didYouMean(name, unset), quotedList(attrNames))
		}
		diags = append(diags, errorDiag("Unsupported argument", detail, attr.NameRange))
	}
	for _, block := range syn.Blocks {
		if known(blockNames, block.Type) {
			continue
		}
		var detail string
		switch {
		case known(attrNames, block.Type):
			detail = fmt.Sprintf("%q is an argument, not a block, in %s. Assign it with an equals sign: %s = ...", block.Type, where, block.Type)
		case len(blockNames) == 0:
			detail = fmt.Sprintf("Blocks of type %q are not expected in %s, which holds no nested blocks.%s", block.Type, where, didYouMean(block.Type, attrNames))
		default:
			detail = fmt.Sprintf("Blocks of type %q are not expected in %s.%s The block types it accepts are %s.", block.Type, where, didYouMean(block.Type, blockNames), quotedList(blockNames))
		}
		diags = append(diags, errorDiag("Unsupported block type", detail, block.TypeRange))
	}
	return content, diags
}

// SortDiagnostics orders diagnostics the way they are read: those without a source range first, then by file and
// position. The sort is stable, so diagnostics at one position keep the order they were raised in, and output never
// depends on map iteration. Load, Build and the commands that merge diagnostics from several stages all use it.
func SortDiagnostics(diags hcl.Diagnostics) {
	sort.SliceStable(diags, func(i, j int) bool {
		a, b := diags[i].Subject, diags[j].Subject
		switch {
		case a == nil && b == nil:
			return false
		case a == nil:
			return true
		case b == nil:
			return false
		case a.Filename != b.Filename:
			return a.Filename < b.Filename
		}
		return a.Start.Byte < b.Start.Byte
	})
}

// editDistance is the optimal string alignment distance: insertions, deletions, substitutions and
// transpositions of adjacent characters each cost 1, so "modle" is one edit from "model".
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

// DiagnosticsText flattens the errors among diags into one line ("file:line: summary: detail; ..."), for the few
// places that can only carry an error string: a function's error (which cannot hold ranges of its own) and apply's
// re-planning of downstream nodes. Everywhere else diagnostics travel whole to a view.
func DiagnosticsText(diags hcl.Diagnostics) string {
	var parts []string
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		s := d.Summary
		if d.Subject != nil {
			s = fmt.Sprintf("%s:%d: %s", d.Subject.Filename, d.Subject.Start.Line, s)
		}
		if d.Detail != "" {
			s += ": " + d.Detail
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// DedupeDiagnostics drops each diagnostic identical (severity, summary, detail and subject) to an earlier one,
// keeping the order: every instance of a node evaluates the same expressions, and validate evaluates what the
// planner evaluates again, so an error that depends on neither would otherwise be reported several times. diags
// itself is left as it is.
func DedupeDiagnostics(diags hcl.Diagnostics) hcl.Diagnostics {
	if len(diags) == 0 {
		return diags
	}
	type key struct {
		sev             hcl.DiagnosticSeverity
		summary, detail string
		subject         hcl.Range
	}
	seen := make(map[key]bool, len(diags))
	out := make(hcl.Diagnostics, 0, len(diags))
	for _, d := range diags {
		k := key{sev: d.Severity, summary: d.Summary, detail: d.Detail}
		if d.Subject != nil {
			k.subject = *d.Subject
		}
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, d)
	}
	return out
}
