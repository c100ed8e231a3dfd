package jsonplan

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hcled"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/planner"
)

// Diagnostic is one diagnostic in the shape of Terraform's JSON diagnostics, plus `rule` when a named rule
// of the planner's catalogue produced it.
type Diagnostic struct {
	Severity string   `json:"severity"` // "error" or "warning"
	Summary  string   `json:"summary"`
	Detail   string   `json:"detail"`
	Rule     string   `json:"rule,omitempty"`
	Range    *Range   `json:"range,omitempty"`
	Snippet  *Snippet `json:"snippet,omitempty"`
	// Policy is set on the finding of an organisation's policy rule (rule "policy-rule-NAME").
	Policy *PolicyFinding `json:"policy,omitempty"`
	// Unreadable marks the stand-in for an entry a plan file held that could not be read (see
	// Diagnostics.UnmarshalJSON); it is never encoded.
	Unreadable bool `json:"-"`
}

// Range is a source range; lines and columns count from 1, bytes from 0.
type Range struct {
	Filename string `json:"filename"`
	Start    Pos    `json:"start"`
	End      Pos    `json:"end"`
}

// Pos is a position in a source file.
type Pos struct {
	Line   int `json:"line"`
	Column int `json:"column"`
	Byte   int `json:"byte"`
}

// Snippet is the source around a diagnostic, as in Terraform's JSON diagnostics: Code holds whole lines
// starting at StartLine, and the highlight offsets are byte offsets into Code.
type Snippet struct {
	Context              *string `json:"context"`
	Code                 string  `json:"code"`
	StartLine            int     `json:"start_line"`
	HighlightStartOffset int     `json:"highlight_start_offset"`
	HighlightEndOffset   int     `json:"highlight_end_offset"`
}

// PolicyFinding is what a policy rule's finding carries beyond its diagnostic: the rule, its level ("deny",
// "warn" or "review": a review finding is a warning that makes the plan need approvals) and the nodes it names.
type PolicyFinding struct {
	Rule    string              `json:"rule"`
	Level   string              `json:"level"`
	Message string              `json:"message"`
	Nodes   []PolicyFindingNode `json:"nodes"`
}

// PolicyFindingNode is a node a rule's finding names, with its block when the plan records one.
type PolicyFindingNode struct {
	Name  string `json:"name"`
	Range *Range `json:"range"`
}

// Severities as written in JSON.
const (
	SeverityError   = "error"
	SeverityWarning = "warning"
)

// maxSnippetLines bounds the code shown for a range spanning many lines (a whole block, say).
const maxSnippetLines = 6

// RedactedSpan replaces the highlighted source of a diagnostic about a secret value.
const RedactedSpan = "(redacted)"

// diagnosticRuleID returns the id of the rule that raised d, or "".
func diagnosticRuleID(d *hcl.Diagnostic) string {
	if x, ok := d.Extra.(interface{ RuleID() string }); ok {
		return x.RuleID()
	}
	return ""
}

// redacted reports whether d points at a value that must never be printed: a credential written by value.
// Its snippet shows the line with the span replaced, so the reader still sees where it is.
func redacted(d *hcl.Diagnostic) bool {
	if x, ok := d.Extra.(interface{ Redact() bool }); ok && x.Redact() {
		return true
	}
	return diagnosticRuleID(d) == planner.RuleCredentialByValue
}

// sourceFiles parses configuration sources on demand, for the "in node "x"" context of a snippet.
type sourceFiles struct {
	src    map[string][]byte
	parsed map[string]*hcl.File
	// secrets are the ranges of values that must never be printed (see redacted); every snippet that shows
	// one shows "(redacted)" in its place, whichever diagnostic the snippet belongs to.
	secrets []hcl.Range
}

func (sf *sourceFiles) noteSecrets(diags hcl.Diagnostics) {
	for _, d := range diags {
		if d.Subject != nil && redacted(d) {
			sf.secrets = append(sf.secrets, *d.Subject)
		}
	}
}

func newSourceFiles(files ...map[string][]byte) *sourceFiles {
	sf := &sourceFiles{src: map[string][]byte{}, parsed: map[string]*hcl.File{}}
	for _, m := range files {
		for k, v := range m {
			sf.src[k] = v
		}
	}
	return sf
}

func (sf *sourceFiles) context(filename string, offset int) string {
	f, ok := sf.parsed[filename]
	if !ok {
		if c, ok := blockContext(filename, sf.src[filename], offset); ok {
			return c
		}
		// The source is parsed again for the context line; too deep a nesting would exhaust the parser's stack.
		if src, ok := sf.src[filename]; ok && utf8.Valid(src) && config.CheckNesting(filename, src) == nil {
			f, _ = hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
		}
		sf.parsed[filename] = f
	}
	if f == nil {
		return ""
	}
	return hcled.ContextString(f, offset)
}

// blockContext is hcled.ContextString of the whole file's parse, from a parse of the one top-level block that
// holds offset (config.TopLevelItem finds it): a diagnostic in a 10,000-node file costs one block's parse, not
// the file's, which would cost as much again as loading it. ok is false when that block is not one clean block
// holding offset, and the caller then parses the file whole.
func blockContext(filename string, src []byte, offset int) (string, bool) {
	if !utf8.Valid(src) {
		return "", false
	}
	start, end, ok := config.TopLevelItem(src, offset)
	if !ok {
		return "", false
	}
	f, diags := hclsyntax.ParseConfig(src[start:end], filename, hcl.InitialPos)
	if f == nil || len(diags) > 0 {
		return "", false
	}
	body, ok := f.Body.(*hclsyntax.Body)
	if !ok || len(body.Attributes) > 0 || len(body.Blocks) != 1 || !body.Blocks[0].Range().ContainsOffset(offset-start) {
		return "", false
	}
	return hcled.ContextString(f, offset-start), true
}

// NewDiagnostic converts one diagnostic; files (name -> source) gives the snippet.
func NewDiagnostic(d *hcl.Diagnostic, files map[string][]byte) Diagnostic {
	sf := newSourceFiles(files)
	sf.noteSecrets(hcl.Diagnostics{d})
	return newDiagnostic(d, sf)
}

func newDiagnostic(d *hcl.Diagnostic, sf *sourceFiles) Diagnostic {
	out := Diagnostic{
		Severity: SeverityError,
		Summary:  d.Summary,
		Detail:   d.Detail,
		Rule:     diagnosticRuleID(d),
	}
	if x, ok := d.Extra.(interface{ PolicyFinding() *PolicyFinding }); ok {
		out.Policy = x.PolicyFinding()
	}
	if d.Severity == hcl.DiagWarning {
		out.Severity = SeverityWarning
	}
	if d.Subject == nil {
		return out
	}
	s := *d.Subject
	out.Range = &Range{
		Filename: s.Filename,
		Start:    Pos{Line: s.Start.Line, Column: s.Start.Column, Byte: s.Start.Byte},
		End:      Pos{Line: s.End.Line, Column: s.End.Column, Byte: s.End.Byte},
	}
	out.Snippet = snippet(d, sf)
	return out
}

// snippet cuts the lines of the diagnostic's range (widened to its context range, if any) out of the source.
// It returns nil when the source is unavailable or does not match the range, rather than guess.
func snippet(d *hcl.Diagnostic, sf *sourceFiles) *Snippet {
	s := *d.Subject
	src, ok := sf.src[s.Filename]
	if !ok || s.Start.Byte < 0 || s.End.Byte > len(src) || s.Start.Byte > s.End.Byte {
		return nil
	}
	from := s
	if d.Context != nil && d.Context.Filename == s.Filename && d.Context.Start.Byte <= s.Start.Byte &&
		d.Context.End.Byte >= s.End.Byte && d.Context.End.Byte <= len(src) {
		from = *d.Context
	}
	lineStart := bytes.LastIndexByte(src[:from.Start.Byte], '\n') + 1
	startLine := 1 + bytes.Count(src[:lineStart], []byte("\n"))
	lineEnd := len(src)
	if i := bytes.IndexByte(src[from.End.Byte:], '\n'); i >= 0 {
		lineEnd = from.End.Byte + i
	}
	if from.End.Byte > from.Start.Byte && from.End.Byte > 0 && src[from.End.Byte-1] == '\n' {
		lineEnd = from.End.Byte - 1 // a range ending just after a newline does not take in the next line
	}
	if lineEnd < lineStart {
		lineEnd = lineStart
	}
	code := string(src[lineStart:lineEnd])
	hlStart, hlEnd := s.Start.Byte-lineStart, s.End.Byte-lineStart
	if hlEnd > len(code) {
		hlEnd = len(code)
	}
	if lines := strings.Split(code, "\n"); len(lines) > maxSnippetLines {
		code = strings.Join(lines[:maxSnippetLines], "\n")
		if hlStart > len(code) {
			hlStart = len(code)
		}
		if hlEnd > len(code) {
			hlEnd = len(code)
		}
	}
	code, hlStart, hlEnd = redactSecrets(code, lineStart, hlStart, hlEnd, s.Filename, sf.secrets)
	out := &Snippet{Code: code, StartLine: startLine, HighlightStartOffset: hlStart, HighlightEndOffset: hlEnd}
	if c := sf.context(s.Filename, s.Start.Byte); c != "" {
		out.Context = &c
	}
	return out
}

// redactSecrets replaces every secret range lying within code (which starts at byte lineStart of its file)
// with RedactedSpan, moving the highlight offsets to match. Secrets are replaced from the last to the first,
// so earlier offsets stay valid.
func redactSecrets(code string, lineStart, hlStart, hlEnd int, filename string, secrets []hcl.Range) (string, int, int) {
	var inside []hcl.Range
	for _, r := range secrets {
		a, b := r.Start.Byte-lineStart, r.End.Byte-lineStart
		if r.Filename == filename && a >= 0 && a <= b && b <= len(code) {
			inside = append(inside, r)
		}
	}
	sort.Slice(inside, func(i, j int) bool { return inside[i].Start.Byte > inside[j].Start.Byte })
	prevStart := len(code) + 1
	for _, r := range inside {
		a, b := r.Start.Byte-lineStart, r.End.Byte-lineStart
		if b > prevStart { // overlaps a secret already replaced
			continue
		}
		prevStart = a
		code = code[:a] + RedactedSpan + code[b:]
		shift := func(off int) int {
			switch {
			case off >= b:
				return off - (b - a) + len(RedactedSpan)
			case off > a:
				return a + len(RedactedSpan)
			}
			return off
		}
		hlStart, hlEnd = shift(hlStart), shift(hlEnd)
		if hlStart > a && hlStart < a+len(RedactedSpan) {
			hlStart = a
		}
	}
	return code, hlStart, hlEnd
}

// DiagnosticsJSON converts diagnostics in order; files (name -> source) gives the snippets.
func NewDiagnostics(diags hcl.Diagnostics, files ...map[string][]byte) []Diagnostic {
	sf := newSourceFiles(files...)
	sf.noteSecrets(diags)
	out := make(Diagnostics, 0, len(diags))
	for _, d := range diags {
		out = append(out, newDiagnostic(d, sf))
	}
	return out
}

// Diagnostics are a document's diagnostics. In a plan document each is encoded as encoding/json.Marshal encodes
// it (HTML characters escaped), the bytes plans have always held; `validate --json` writes the same type unescaped.
type Diagnostics []Diagnostic

// MarshalJSON encodes the diagnostics with HTML characters escaped.
func (ds Diagnostics) MarshalJSON() ([]byte, error) { return json.Marshal([]Diagnostic(ds)) }

// UnmarshalJSON decodes the diagnostics one by one: an entry this version cannot read (not an object of this
// shape) is kept as an error saying so (Unreadable set), so that a hand-edited plan shows something rather than
// nothing, and is not mistaken for the diagnostic it replaced.
func (ds *Diagnostics) UnmarshalJSON(b []byte) error {
	var raws []json.RawMessage
	if err := json.Unmarshal(b, &raws); err != nil {
		return err
	}
	if raws == nil {
		*ds = nil
		return nil
	}
	out := make(Diagnostics, 0, len(raws))
	for _, raw := range raws {
		var d Diagnostic
		if err := json.Unmarshal(raw, &d); err != nil {
			d = Diagnostic{Severity: SeverityError, Summary: "Unreadable diagnostic",
				Detail: "The plan holds a diagnostic this version of kewplan cannot read.", Unreadable: true}
		}
		out = append(out, d)
	}
	*ds = out
	return nil
}
