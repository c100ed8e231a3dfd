package views

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/mitchellh/go-wordwrap"

	"github.com/kewplan/kewplan/internal/jsonstream"
	"github.com/kewplan/kewplan/internal/termsafe"
	"github.com/kewplan/kewplan/jsonplan"
)

// validateFormatVersion is the version of the `validate --json` document, Terraform's `validate -json` shape.
const validateFormatVersion = "1.0"

// validateJSON is the document `kewplan validate --json` prints.
type validateJSON struct {
	FormatVersion string                `json:"format_version"`
	Valid         bool                  `json:"valid"`
	ErrorCount    int                   `json:"error_count"`
	WarningCount  int                   `json:"warning_count"`
	Diagnostics   []jsonplan.Diagnostic `json:"diagnostics"`
}

// newValidateJSON builds the `validate --json` document.
func newValidateJSON(diags hcl.Diagnostics, files ...map[string][]byte) *validateJSON {
	doc := &validateJSON{FormatVersion: validateFormatVersion, Diagnostics: jsonplan.NewDiagnostics(diags, files...)}
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

// writeValidateJSON writes doc as indented JSON with a stable key order.
func writeValidateJSON(w io.Writer, doc *validateJSON) error {
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

// writeDiagnostics renders diagnostics for people, in the way of Terraform's format.Diagnostic:
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
func writeDiagnostics(w io.Writer, diags hcl.Diagnostics, color bool, files ...map[string][]byte) error {
	bw := bufio.NewWriter(w)
	for i, d := range jsonplan.NewDiagnostics(diags, files...) {
		if i > 0 {
			bw.WriteString("\n")
		}
		writeDiagnostic(bw, d, color)
	}
	return bw.Flush()
}

// writeDiagnosticJSONHuman renders diagnostics already in the JSON shape (read back from a saved document).
func writeDiagnosticJSONHuman(w io.Writer, diags []jsonplan.Diagnostic, color bool) error {
	bw := bufio.NewWriter(w)
	for i, d := range diags {
		if i > 0 {
			bw.WriteString("\n")
		}
		writeDiagnostic(bw, d, color)
	}
	return bw.Flush()
}

func writeDiagnostic(w *bufio.Writer, d jsonplan.Diagnostic, color bool) {
	style := func(s, codes string) string {
		if !color {
			return s
		}
		return codes + s + ansiReset
	}
	label := style("Error:", ansiBold+ansiRed)
	if d.Severity == jsonplan.SeverityWarning {
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
func writeSnippet(w *bufio.Writer, sn *jsonplan.Snippet, color bool) {
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
