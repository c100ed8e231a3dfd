package views

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/kewplan/kewplan/internal/jsonstream"
	"github.com/kewplan/kewplan/internal/termsafe"
	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/plandiff"
	"github.com/kewplan/kewplan/planner"
)

// diffFormatVersion is the version of the `kewplan diff --format json` document.
const diffFormatVersion = "1.0"

// diffJSON is the `kewplan diff --format json` document. Lists are never null, so consumers can iterate without
// checks; the order is deterministic (exposure delta widening first, nodes by name).
type diffJSON struct {
	FormatVersion       string               `json:"format_version"`
	Widened             bool                 `json:"widened"`
	Verdict             string               `json:"verdict"`
	Base                diffSideJSON         `json:"base"`
	Head                diffSideJSON         `json:"head"`
	Summary             diffSummaryJSON      `json:"summary"`
	ExposureDelta       []diffFindingJSON    `json:"exposure_delta"`
	NodesAdded          []diffNodeJSON       `json:"nodes_added"`
	NodesRemoved        []diffNodeJSON       `json:"nodes_removed"`
	NodesChanged        []diffNodeChangeJSON `json:"nodes_changed"`
	DiagnosticsAdded    []diffDiagnosticJSON `json:"diagnostics_added"`
	DiagnosticsResolved []diffDiagnosticJSON `json:"diagnostics_resolved"`
	// PolicyFindings are the findings of the policy's rules (diff --policy), as plan --json writes them;
	// absent when no rule judged the diff.
	PolicyFindings *[]jsonplan.Diagnostic `json:"policy_findings,omitempty"`
}

// diffSideJSON identifies one of the compared plans.
type diffSideJSON struct {
	File           string `json:"file"`
	FormatVersion  string `json:"format_version"`
	KewplanVersion string `json:"kewplan_version"`
	ConfigDigest   string `json:"config_digest"`
}

// diffSummaryJSON counts the diff.
type diffSummaryJSON struct {
	Widening     int `json:"widening"`
	Narrowing    int `json:"narrowing"`
	NodesAdded   int `json:"nodes_added"`
	NodesRemoved int `json:"nodes_removed"`
	NodesChanged int `json:"nodes_changed"`
}

// diffFindingJSON is one entry of the credential exposure delta.
type diffFindingJSON struct {
	Kind       string          `json:"kind"`
	Widening   bool            `json:"widening"`
	Node       string          `json:"node"`
	Credential string          `json:"credential,omitempty"`
	Message    string          `json:"message"`
	Range      *jsonplan.Range `json:"range,omitempty"`
}

// diffNodeJSON is an added or removed node.
type diffNodeJSON struct {
	Name        string          `json:"name"`
	Runner      string          `json:"runner"`
	Role        string          `json:"role"`
	Image       string          `json:"image"`
	Network     string          `json:"network"`
	Isolation   string          `json:"isolation"`
	Credentials []string        `json:"credentials"`
	Argv        []string        `json:"argv"`
	Range       *jsonplan.Range `json:"range,omitempty"`
}

// diffNodeChangeJSON is a node present in both plans that changed.
type diffNodeChangeJSON struct {
	Name             string              `json:"name"`
	Changes          []diffFieldJSON     `json:"changes"`
	DependsOnAdded   []string            `json:"depends_on_added"`
	DependsOnRemoved []string            `json:"depends_on_removed"`
	Argv             []plandiff.WordEdit `json:"argv"`
	Range            *jsonplan.Range     `json:"range,omitempty"`
}

// diffFieldJSON is one changed field of a node.
type diffFieldJSON struct {
	Field string `json:"field"`
	Base  string `json:"base"`
	Head  string `json:"head"`
}

// diffDiagnosticJSON is a diagnostic that appeared or was resolved between the plans.
type diffDiagnosticJSON struct {
	Severity string          `json:"severity"`
	Summary  string          `json:"summary"`
	Detail   string          `json:"detail"`
	Rule     string          `json:"rule,omitempty"`
	Range    *jsonplan.Range `json:"range,omitempty"`
}

// Verdicts of a diff.
const (
	verdictWidened   = "widened"   // review required: exit 2
	verdictNarrowed  = "narrowed"  // only narrowing exposure changes
	verdictChanged   = "changed"   // changes, none of them to exposure
	verdictUnchanged = "unchanged" // nothing changed
)

// diffVerdict names what the diff amounts to.
func diffVerdict(d *plandiff.Diff) string {
	w, n := d.Counts()
	switch {
	case w > 0:
		return verdictWidened
	case n > 0:
		return verdictNarrowed
	case !d.Empty():
		return verdictChanged
	default:
		return verdictUnchanged
	}
}

// newDiffJSON converts a diff into its JSON document.
func newDiffJSON(d *plandiff.Diff) *diffJSON {
	w, n := d.Counts()
	doc := &diffJSON{
		FormatVersion: diffFormatVersion,
		Widened:       d.Widened(),
		Verdict:       diffVerdict(d),
		Base:          diffSide(d.Base),
		Head:          diffSide(d.Head),
		Summary: diffSummaryJSON{Widening: w, Narrowing: n, NodesAdded: len(d.Added), NodesRemoved: len(d.Removed),
			NodesChanged: len(d.Changed)},
		ExposureDelta:       []diffFindingJSON{},
		NodesAdded:          diffNodes(d.Added),
		NodesRemoved:        diffNodes(d.Removed),
		NodesChanged:        []diffNodeChangeJSON{},
		DiagnosticsAdded:    diffDiagnostics(d.DiagnosticsAdded),
		DiagnosticsResolved: diffDiagnostics(d.DiagnosticsResolved),
	}
	if d.PolicyJudged {
		findings := append([]jsonplan.Diagnostic{}, d.PolicyFindings...)
		doc.PolicyFindings = &findings
	}
	for _, f := range d.Exposure {
		doc.ExposureDelta = append(doc.ExposureDelta, diffFindingJSON{Kind: f.Kind, Widening: f.Widening, Node: f.Node,
			Credential: f.Credential, Message: f.Message, Range: diffRange(f.Range)})
	}
	for _, c := range d.Changed {
		cj := diffNodeChangeJSON{Name: c.Name, Changes: []diffFieldJSON{}, DependsOnAdded: nonNilStrings(c.DependsOnAdded),
			DependsOnRemoved: nonNilStrings(c.DependsOnRemoved), Argv: []plandiff.WordEdit{}, Range: diffRange(c.Range)}
		for _, f := range c.Fields {
			cj.Changes = append(cj.Changes, diffFieldJSON{Field: f.Field, Base: f.Base, Head: f.Head})
		}
		if c.Argv != nil {
			cj.Argv = c.Argv
		}
		doc.NodesChanged = append(doc.NodesChanged, cj)
	}
	return doc
}

func diffSide(s plandiff.Side) diffSideJSON {
	return diffSideJSON{File: s.Name, FormatVersion: s.FormatVersion, KewplanVersion: s.KewplanVersion, ConfigDigest: s.ConfigDigest}
}

func diffNodes(ns []plandiff.NodeSummary) []diffNodeJSON {
	out := []diffNodeJSON{}
	for _, n := range ns {
		out = append(out, diffNodeJSON{Name: n.Name, Runner: n.Runner, Role: n.Role, Image: n.Image, Network: n.Network,
			Isolation: n.Isolation, Credentials: nonNilStrings(n.Credentials), Argv: nonNilStrings(n.Argv), Range: diffRange(n.Range)})
	}
	return out
}

func diffDiagnostics(ds []plandiff.Diagnostic) []diffDiagnosticJSON {
	out := []diffDiagnosticJSON{}
	for _, d := range ds {
		out = append(out, diffDiagnosticJSON{Severity: d.Severity, Summary: d.Summary, Detail: d.Detail, Rule: d.Rule,
			Range: diffRange(d.Range)})
	}
	return out
}

func diffRange(r *hcl.Range) *jsonplan.Range {
	if r == nil {
		return nil
	}
	return &jsonplan.Range{
		Filename: r.Filename,
		Start:    jsonplan.Pos{Line: r.Start.Line, Column: r.Start.Column, Byte: r.Start.Byte},
		End:      jsonplan.Pos{Line: r.End.Line, Column: r.End.Column, Byte: r.End.Byte},
	}
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// writeDiffJSON writes the diff as indented JSON.
func writeDiffJSON(w io.Writer, d *plandiff.Diff) error {
	return jsonstream.Indented(w, newDiffJSON(d))
}

// diffRenderer writes a diff in one format.
type diffRenderer func(w io.Writer, d *plandiff.Diff, opts DiffOptions) error

// DiffOptions are what the renderers need besides the diff.
type DiffOptions struct {
	Color          bool   // ANSI styles in the human format
	KewplanVersion string // for SARIF's tool version
	// Source returns the text of a configuration file named in the HEAD plan's ranges, for SARIF fingerprints;
	// nil, or false, when it cannot be read (the fingerprint then rests on the node and rule alone).
	Source func(filename string) ([]byte, bool)
	// URI maps a file name of a range to the SARIF artifact URI (relative to the repository root, forward
	// slashes). Nil keeps the name, with forward slashes.
	URI func(filename string) string
}

// diffFormats are the formats of `kewplan diff --format`.
var diffFormats = map[string]diffRenderer{
	"human":    writeDiffHuman,
	"json":     func(w io.Writer, d *plandiff.Diff, _ DiffOptions) error { return writeDiffJSON(w, d) },
	"markdown": func(w io.Writer, d *plandiff.Diff, _ DiffOptions) error { return writeDiffMarkdown(w, d) },
	"sarif":    writeDiffSARIF,
}

// diffFormatNames lists diffFormats, sorted.
func diffFormatNames() []string {
	return slices.Sorted(maps.Keys(diffFormats))
}

// ANSI green, for narrowing and inserted argv lines (the other styles are in diagnostics.go).
const diffANSIGreen = "\x1b[32m"

// writeDiffHuman writes the diff for a reviewer at a terminal: the exposure delta first, then nodes added,
// removed and changed (argv as a diff of flag lines), the diagnostics that appeared or went, and a verdict line.
// Every value from the plans passes through diffSafe: a plan file is input, and must not drive the terminal.
func writeDiffHuman(w io.Writer, d *plandiff.Diff, opts DiffOptions) error {
	pw := &planWriter{w: w, escaped: opts.Color}
	style := func(s, codes string) string {
		if !opts.Color {
			return s
		}
		return codes + s + ansiReset
	}
	pw.printf("kewplan diff %s %s\n", diffSafe(d.Base.Name), diffSafe(d.Head.Name))
	if d.Empty() {
		pw.printf("\nNo changes: the plans are the same for review.\n")
		return pw.err
	}
	if len(d.Exposure) > 0 {
		pw.printf("\nCredential exposure delta\n")
		for _, f := range d.Exposure {
			if f.Widening {
				pw.printf("  %s %s\n", style("! widening ", ansiBold+ansiRed), diffSafe(f.Message))
			} else {
				pw.printf("  %s %s\n", style("  narrowing", diffANSIGreen), diffSafe(f.Message))
			}
		}
	}
	if len(d.Added) > 0 {
		pw.printf("\nNodes added\n")
		for _, n := range d.Added {
			pw.printf("  %s node %s: runner %s, %s, network %s, isolation %s, image %s, credentials %s\n", style("+", diffANSIGreen),
				nodeLabel(diffSafe(n.Name)), diffSafe(n.Runner), diffSafe(orNone(n.Role)), diffSafe(orNone(n.Network)),
				diffSafe(orNone(n.Isolation)), diffSafe(orNone(n.Image)), diffSafe(orNone(strings.Join(n.Credentials, ", "))))
		}
	}
	if len(d.Removed) > 0 {
		pw.printf("\nNodes removed\n")
		for _, n := range d.Removed {
			pw.printf("  %s node %s: runner %s\n", style("-", ansiRed), nodeLabel(diffSafe(n.Name)), diffSafe(n.Runner))
		}
	}
	if len(d.Changed) > 0 {
		pw.printf("\nNodes changed\n")
		for _, c := range d.Changed {
			pw.printf("  ~ node %s\n", nodeLabel(diffSafe(c.Name)))
			for _, f := range c.Fields {
				pw.printf("      %s: %s -> %s\n", diffSafe(f.Field), diffSafe(orNone(f.Base)), diffSafe(orNone(f.Head)))
			}
			if len(c.DependsOnAdded) > 0 || len(c.DependsOnRemoved) > 0 {
				pw.printf("      depends on: %s\n", diffSafe(dependsText(c)))
			}
			if c.Argv != nil {
				pw.printf("      argv:\n")
				for _, l := range diffArgvHunks(diffArgvLines(c.Argv), diffArgvContext) {
					text := diffSafe(l.Op + " " + l.Text)
					switch l.Op {
					case plandiff.OpDelete:
						text = style(text, ansiRed)
					case plandiff.OpInsert:
						text = style(text, diffANSIGreen)
					}
					pw.printf("        %s\n", text)
				}
			}
		}
	}
	if len(d.DiagnosticsAdded) > 0 || len(d.DiagnosticsResolved) > 0 {
		pw.printf("\nDiagnostics\n")
		for _, x := range d.DiagnosticsAdded {
			pw.printf("  + %s\n", diffSafe(diagnosticLine(x)))
		}
		for _, x := range d.DiagnosticsResolved {
			pw.printf("  - %s (resolved)\n", diffSafe(diagnosticLine(x)))
		}
	}
	if len(d.PolicyFindings) > 0 {
		pw.printf("\nPolicy rules\n")
		for _, x := range d.PolicyFindings {
			pw.printf("  %s %s\n", style(policyMark(x), ansiBold+policyColour(x)), diffSafe(policyFindingLine(x)))
		}
	}
	pw.printf("\n%s\n", style(diffVerdictLine(d), ansiBold))
	return pw.err
}

// policyMark is a policy finding's level, padded for a column.
func policyMark(x jsonplan.Diagnostic) string {
	level := "warn"
	if x.Policy != nil {
		level = x.Policy.Level
	}
	return fmt.Sprintf("%-6s", level)
}

func policyColour(x jsonplan.Diagnostic) string {
	if x.Severity == jsonplan.SeverityError {
		return ansiRed
	}
	return ""
}

// policyFindingLine is a policy finding on one line: its summary and id, where the rule is, and what it says.
func policyFindingLine(x jsonplan.Diagnostic) string {
	s := x.Summary + " [" + x.Rule + "]"
	if x.Range != nil {
		s += fmt.Sprintf(" (%s:%d)", x.Range.Filename, x.Range.Start.Line)
	}
	if x.Detail != "" {
		s += ": " + x.Detail
	}
	return s
}

func dependsText(c plandiff.NodeChange) string {
	var parts []string
	for _, n := range c.DependsOnAdded {
		parts = append(parts, "+"+n)
	}
	for _, n := range c.DependsOnRemoved {
		parts = append(parts, "-"+n)
	}
	return strings.Join(parts, " ")
}

func diagnosticLine(d plandiff.Diagnostic) string {
	s := capitalFirst(d.Severity) + ": " + d.Summary
	if d.Rule != "" {
		s += " [" + d.Rule + "]"
	}
	if d.Range != nil {
		s += fmt.Sprintf(" on %s:%d", d.Range.Filename, d.Range.Start.Line)
	}
	return s
}

func capitalFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// diffVerdictLine is the one-line outcome shared by the human and markdown views.
func diffVerdictLine(d *plandiff.Diff) string {
	w, n := d.Counts()
	var parts []string
	if n > 0 {
		parts = append(parts, count(n, "narrowing change", "narrowing changes"))
	}
	for _, c := range []struct {
		n    int
		verb string
	}{{len(d.Added), "added"}, {len(d.Removed), "removed"}, {len(d.Changed), "changed"}} {
		if c.n > 0 {
			parts = append(parts, count(c.n, "node", "nodes")+" "+c.verb)
		}
	}
	rest := ""
	if len(parts) > 0 {
		rest = "; " + strings.Join(parts, ", ")
	}
	switch diffVerdict(d) {
	case verdictWidened:
		return fmt.Sprintf("Review required: %s credential exposure%s.",
			count(w, "change widens", "changes widen"), rest)
	case verdictNarrowed, verdictChanged:
		return fmt.Sprintf("No widening%s.", rest)
	default:
		return "No changes."
	}
}

// diffArgvContext is how many unchanged argv lines are shown around a change.
const diffArgvContext = 2

// diffArgvHunks keeps the changed lines of an argv diff and context unchanged lines around each; a run of
// unchanged lines left out becomes one line with Op " " and Text "...".
func diffArgvHunks(lines []diffArgvLine, context int) []diffArgvLine {
	keep := make([]bool, len(lines))
	for i, l := range lines {
		if l.Op == plandiff.OpEqual {
			continue
		}
		for j := max(0, i-context); j <= min(len(lines)-1, i+context); j++ {
			keep[j] = true
		}
	}
	var out []diffArgvLine
	for i, l := range lines {
		switch {
		case keep[i]:
			out = append(out, l)
		case i == 0 || keep[i-1]:
			out = append(out, diffArgvLine{Op: plandiff.OpEqual, Text: "..."})
		}
	}
	return out
}

// diffArgvLine is one line of an argv diff: a flag with its value (or the image, or a container arg) as it reads
// in BASE (Op "-"), in HEAD (Op "+"), or in both (Op " ").
type diffArgvLine struct {
	Op   string
	Text string // shell-quoted words
}

// diffArgvLines groups a word-level argv diff into flag lines, the way the plan shows argv: a line that changed
// appears twice, as it was and as it is, so a reviewer reads "--pids-limit 512" against "--pids-limit 4096"
// rather than loose words.
func diffArgvLines(edits []plandiff.WordEdit) []diffArgvLine {
	type group struct {
		edits []plandiff.WordEdit
		flag  bool
		// has: the flag is on that side; took: the flag's value (or, in a group without a flag, its word) is.
		hasBase, hasHead, tookBase, tookHead bool
	}
	var groups []*group
	cur := &group{}
	isFlag := func(w string) bool { return strings.HasPrefix(w, "-") && len(w) > 1 }
	for i, e := range edits {
		base := e.Op != plandiff.OpInsert
		head := e.Op != plandiff.OpDelete
		fits := func() bool {
			if cur.flag {
				return (!base || (cur.hasBase && !cur.tookBase)) && (!head || (cur.hasHead && !cur.tookHead))
			}
			return (!base || !cur.tookBase) && (!head || !cur.tookHead)
		}
		switch {
		case i < 2 && e.Op == plandiff.OpEqual && len(groups) == 0:
			// "docker run" opens the first line.
		case isFlag(e.Word):
			groups = append(groups, cur)
			cur = &group{flag: true, hasBase: base, hasHead: head}
		default:
			if (i == 2 && len(groups) == 0) || !fits() {
				groups = append(groups, cur)
				cur = &group{}
			}
			cur.tookBase = cur.tookBase || base
			cur.tookHead = cur.tookHead || head
		}
		cur.edits = append(cur.edits, e)
	}
	groups = append(groups, cur)

	var out []diffArgvLine
	for _, g := range groups {
		if len(g.edits) == 0 {
			continue
		}
		var base, head []string
		changed := false
		for _, e := range g.edits {
			if e.Op != plandiff.OpInsert {
				base = append(base, e.Word)
			}
			if e.Op != plandiff.OpDelete {
				head = append(head, e.Word)
			}
			if e.Op != plandiff.OpEqual {
				changed = true
			}
		}
		if !changed {
			out = append(out, diffArgvLine{Op: plandiff.OpEqual, Text: planner.ShellJoin(base)})
			continue
		}
		if len(base) > 0 {
			out = append(out, diffArgvLine{Op: plandiff.OpDelete, Text: planner.ShellJoin(base)})
		}
		if len(head) > 0 {
			out = append(out, diffArgvLine{Op: plandiff.OpInsert, Text: planner.ShellJoin(head)})
		}
	}
	return out
}

// diffSafe makes a value from a plan file safe to print on a terminal: control characters (escape sequences
// could recolour, move the cursor or hide text) and bidirectional overrides are shown escaped (termsafe.String).
func diffSafe(s string) string { return termsafe.String(s) }
