package views

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hcled"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/mitchellh/go-wordwrap"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/internal/jsonstream"
	"github.com/kewplan/kewplan/internal/termsafe"
	"github.com/kewplan/kewplan/planner"
)

// ValidateFormatVersion is the version of the `validate --json` document, Terraform's `validate -json` shape.
const ValidateFormatVersion = "1.0"

// ValidateJSON is the document `kewplan validate --json` prints.
type ValidateJSON struct {
	FormatVersion string           `json:"format_version"`
	Valid         bool             `json:"valid"`
	ErrorCount    int              `json:"error_count"`
	WarningCount  int              `json:"warning_count"`
	Diagnostics   []DiagnosticJSON `json:"diagnostics"`
}

// DiagnosticJSON is one diagnostic in the shape of Terraform's JSON diagnostics, plus `rule` when a named rule
// of the planner's catalogue produced it.
type DiagnosticJSON struct {
	Severity string       `json:"severity"` // "error" or "warning"
	Summary  string       `json:"summary"`
	Detail   string       `json:"detail"`
	Rule     string       `json:"rule,omitempty"`
	Range    *RangeJSON   `json:"range,omitempty"`
	Snippet  *SnippetJSON `json:"snippet,omitempty"`
}

// RangeJSON is a source range; lines and columns count from 1, bytes from 0.
type RangeJSON struct {
	Filename string  `json:"filename"`
	Start    PosJSON `json:"start"`
	End      PosJSON `json:"end"`
}

// PosJSON is a position in a source file.
type PosJSON struct {
	Line   int `json:"line"`
	Column int `json:"column"`
	Byte   int `json:"byte"`
}

// SnippetJSON is the source around a diagnostic, as in Terraform's JSON diagnostics: Code holds whole lines
// starting at StartLine, and the highlight offsets are byte offsets into Code.
type SnippetJSON struct {
	Context              *string `json:"context"`
	Code                 string  `json:"code"`
	StartLine            int     `json:"start_line"`
	HighlightStartOffset int     `json:"highlight_start_offset"`
	HighlightEndOffset   int     `json:"highlight_end_offset"`
}

// Severities as written in JSON.
const (
	SeverityError   = "error"
	SeverityWarning = "warning"
)

// maxSnippetLines bounds the code shown for a range spanning many lines (a whole block, say).
const maxSnippetLines = 6

// redactedSpan replaces the highlighted source of a diagnostic about a secret value.
const redactedSpan = "(redacted)"

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

// NewDiagnosticJSON converts one diagnostic; files (name -> source) gives the snippet.
func NewDiagnosticJSON(d *hcl.Diagnostic, files map[string][]byte) DiagnosticJSON {
	sf := newSourceFiles(files)
	sf.noteSecrets(hcl.Diagnostics{d})
	return newDiagnosticJSON(d, sf)
}

func newDiagnosticJSON(d *hcl.Diagnostic, sf *sourceFiles) DiagnosticJSON {
	out := DiagnosticJSON{
		Severity: SeverityError,
		Summary:  d.Summary,
		Detail:   d.Detail,
		Rule:     diagnosticRuleID(d),
	}
	if d.Severity == hcl.DiagWarning {
		out.Severity = SeverityWarning
	}
	if d.Subject == nil {
		return out
	}
	s := *d.Subject
	out.Range = &RangeJSON{
		Filename: s.Filename,
		Start:    PosJSON{Line: s.Start.Line, Column: s.Start.Column, Byte: s.Start.Byte},
		End:      PosJSON{Line: s.End.Line, Column: s.End.Column, Byte: s.End.Byte},
	}
	out.Snippet = snippet(d, sf)
	return out
}

// snippet cuts the lines of the diagnostic's range (widened to its context range, if any) out of the source.
// It returns nil when the source is unavailable or does not match the range, rather than guess.
func snippet(d *hcl.Diagnostic, sf *sourceFiles) *SnippetJSON {
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
	out := &SnippetJSON{Code: code, StartLine: startLine, HighlightStartOffset: hlStart, HighlightEndOffset: hlEnd}
	if c := sf.context(s.Filename, s.Start.Byte); c != "" {
		out.Context = &c
	}
	return out
}

// redactSecrets replaces every secret range lying within code (which starts at byte lineStart of its file)
// with redactedSpan, moving the highlight offsets to match. Secrets are replaced from the last to the first,
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
		code = code[:a] + redactedSpan + code[b:]
		shift := func(off int) int {
			switch {
			case off >= b:
				return off - (b - a) + len(redactedSpan)
			case off > a:
				return a + len(redactedSpan)
			}
			return off
		}
		hlStart, hlEnd = shift(hlStart), shift(hlEnd)
		if hlStart > a && hlStart < a+len(redactedSpan) {
			hlStart = a
		}
	}
	return code, hlStart, hlEnd
}

// DiagnosticsJSON converts diagnostics in order; files (name -> source) gives the snippets.
func DiagnosticsJSON(diags hcl.Diagnostics, files ...map[string][]byte) []DiagnosticJSON {
	sf := newSourceFiles(files...)
	sf.noteSecrets(diags)
	out := make([]DiagnosticJSON, 0, len(diags))
	for _, d := range diags {
		out = append(out, newDiagnosticJSON(d, sf))
	}
	return out
}

// NewValidateJSON builds the `validate --json` document.
func NewValidateJSON(diags hcl.Diagnostics, files ...map[string][]byte) *ValidateJSON {
	doc := &ValidateJSON{FormatVersion: ValidateFormatVersion, Diagnostics: DiagnosticsJSON(diags, files...)}
	for _, d := range diags {
		if d.Severity == hcl.DiagWarning {
			doc.WarningCount++
		} else {
			doc.ErrorCount++
		}
	}
	doc.Valid = doc.ErrorCount == 0
	return doc
}

// WriteValidateJSON writes doc as indented JSON with a stable key order.
func WriteValidateJSON(w io.Writer, doc *ValidateJSON) error {
	return jsonstream.Indented(w, doc)
}

// ANSI styles for human diagnostics.
const (
	ansiReset     = "\x1b[0m"
	ansiBold      = "\x1b[1m"
	ansiRed       = "\x1b[31m"
	ansiYellow    = "\x1b[33m"
	ansiUnderline = "\x1b[4m"
)

// diagnosticWidth is where details are wrapped: a fixed width keeps output identical in every terminal and log.
const diagnosticWidth = 78

// WriteDiagnostics renders diagnostics for people, in the way of Terraform's format.Diagnostic:
//
//	Error: Unsupported argument
//
//	  on examples/quickstart.hcl line 12, in node "fix":
//	  12:   modle = "claude-sonnet-4-5"
//	        ^^^^^
//
//	An argument named "modle" is not expected in a node block. Did you mean "model"?
//
// files (name -> source, several maps merged) gives the snippets. color adds ANSI styles; the span is then
// also underlined.
func WriteDiagnostics(w io.Writer, diags hcl.Diagnostics, color bool, files ...map[string][]byte) error {
	bw := bufio.NewWriter(w)
	sf := newSourceFiles(files...)
	sf.noteSecrets(diags)
	for i, d := range diags {
		if i > 0 {
			bw.WriteString("\n")
		}
		writeDiagnostic(bw, newDiagnosticJSON(d, sf), color)
	}
	return bw.Flush()
}

// WriteDiagnosticJSONHuman renders diagnostics already in the JSON shape (read back from a saved document).
func WriteDiagnosticJSONHuman(w io.Writer, diags []DiagnosticJSON, color bool) error {
	bw := bufio.NewWriter(w)
	for i, d := range diags {
		if i > 0 {
			bw.WriteString("\n")
		}
		writeDiagnostic(bw, d, color)
	}
	return bw.Flush()
}

func writeDiagnostic(w *bufio.Writer, d DiagnosticJSON, color bool) {
	style := func(s, codes string) string {
		if !color {
			return s
		}
		return codes + s + ansiReset
	}
	label := style("Error:", ansiBold+ansiRed)
	if d.Severity == SeverityWarning {
		label = style("Warning:", ansiBold+ansiYellow)
	}
	// Every text below may come from the source under review or a plan file: escaped (termsafe), so that no
	// control character or bidirectional override reaches the terminal. Our own ANSI styles are added after.
	summary := termsafe.String(d.Summary)
	if d.Rule != "" {
		summary += " [" + termsafe.String(d.Rule) + "]"
	}
	fmt.Fprintf(w, "%s %s\n", label, style(summary, ansiBold))

	if d.Range != nil {
		w.WriteString("\n")
		filename := termsafe.String(d.Range.Filename)
		if d.Snippet != nil && d.Snippet.Context != nil {
			fmt.Fprintf(w, "  on %s line %d, in %s:\n", filename, d.Range.Start.Line, termsafe.String(*d.Snippet.Context))
		} else {
			fmt.Fprintf(w, "  on %s line %d:\n", filename, d.Range.Start.Line)
		}
		if d.Snippet != nil {
			writeSnippet(w, d.Snippet, color)
		}
	}
	if d.Detail != "" {
		w.WriteString("\n")
		for _, para := range strings.Split(d.Detail, "\n") {
			if para == "" {
				w.WriteString("\n")
				continue
			}
			w.WriteString(wordwrap.WrapString(termsafe.Text(para), diagnosticWidth))
			w.WriteString("\n")
		}
	}
}

// writeSnippet prints the code lines with numbers, the highlighted span underlined when colour is on and
// marked with carets on the line below in any case.
func writeSnippet(w *bufio.Writer, sn *SnippetJSON, color bool) {
	lines := strings.Split(sn.Code, "\n")
	numWidth := len(fmt.Sprint(sn.StartLine + len(lines) - 1))
	hlStart, hlEnd := sn.HighlightStartOffset, sn.HighlightEndOffset
	offset := 0
	for i, line := range lines {
		lineStart, lineEnd := offset, offset+len(line)
		offset = lineEnd + 1
		shown := strings.ReplaceAll(line, "\t", " ")
		prefix := fmt.Sprintf("  %*d: ", numWidth, sn.StartLine+i)
		a, b := max(hlStart, lineStart)-lineStart, min(hlEnd, lineEnd)-lineStart
		marked := a < b || (hlStart == hlEnd && hlStart >= lineStart && hlStart <= lineEnd)
		if !marked || a < 0 || a > len(shown) || max(a, b) > len(shown) {
			fmt.Fprintf(w, "%s%s\n", prefix, strings.TrimRight(termsafe.String(shown), " "))
			continue
		}
		// Escaped piece by piece, so that the carets stay under the escaped span.
		before, span, after := termsafe.String(shown[:a]), termsafe.String(shown[a:max(a, b)]), termsafe.String(shown[max(a, b):])
		if color && a < b {
			fmt.Fprintf(w, "%s%s%s%s%s%s\n", prefix, before, ansiUnderline, span, ansiReset, strings.TrimRight(after, " "))
		} else {
			fmt.Fprintf(w, "%s%s\n", prefix, strings.TrimRight(before+span+after, " "))
		}
		marks := max(utf8.RuneCountInString(span), 1)
		fmt.Fprintf(w, "%s%s\n", strings.Repeat(" ", len(prefix)+utf8.RuneCountInString(before)), strings.Repeat("^", marks))
	}
}
