package views

import (
	"fmt"
	"io"

	"github.com/hashicorp/hcl/v2"

	"github.com/kewplan/kewplan/internal/termsafe"
)

// ViewType is how a command's output is meant to be read: by a person, or by a program (JSON).
type ViewType int

const (
	// viewHuman is text for people: colour and live lines when Streams say so.
	viewHuman ViewType = iota
	// viewJSON is a JSON document (or NDJSON events) on stdout; what a person should still see goes to stderr.
	viewJSON
)

// ViewTypeOf is viewJSON when a command's --json flag is set, viewHuman otherwise.
func ViewTypeOf(asJSON bool) ViewType {
	if asJSON {
		return viewJSON
	}
	return viewHuman
}

// Streams are where the views write and what they may assume about them.
type Streams struct {
	Stdout io.Writer // the command's result
	Stderr io.Writer // diagnostics, errors, prompts' companions and progress for people
	// Color allows ANSI styles (a terminal, and neither --no-color nor NO_COLOR).
	Color bool
	// Terminal is true when Stdout is a terminal: apply keeps its live block there, checks show progress.
	Terminal bool
}

// View is what every command's view shares: diagnostics and errors for people, on stderr.
type View struct {
	streams Streams
}

// NewView returns the shared view over s; the command views embed it.
func NewView(s Streams) *View { return &View{streams: s} }

// Diagnostics writes diagnostics for people to stderr, with source snippets from files, in colour only when the
// streams allow it.
func (v *View) Diagnostics(diags hcl.Diagnostics, files ...map[string][]byte) {
	if len(diags) == 0 {
		return
	}
	_ = writeDiagnostics(v.streams.Stderr, diags, v.streams.Color, files...)
}

// Error reports an error that ends the command: "Error: …" on stderr. An error may quote a plan file, a
// configuration or an agent's output, so it is escaped (termsafe.Text) like every other string from them.
func (v *View) Error(err error) {
	fmt.Fprintf(v.streams.Stderr, "Error: %s\n", errorText(err))
}

// errorText is err's message escaped for a terminal.
func errorText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return termsafe.Text(err.Error())
}

// UsageError reports a command line that does not parse, and where to read the usage.
func (v *View) UsageError(err error) {
	fmt.Fprintf(v.streams.Stderr, "Error: %s\n", errorText(err))
	fmt.Fprintf(v.streams.Stderr, "Run 'kewplan --help' for usage.\n")
}

// SetupError reports that the command line grammar itself could not be built (a bug, not a user's mistake).
func (v *View) SetupError(err error) {
	fmt.Fprintf(v.streams.Stderr, "kewplan: %v\n", err)
}

// Crash reports a panic in kewplan's own code: one short paragraph asking for a report, and the stack trace only
// when one is given (KEWPLAN_DEBUG). The panic value is escaped: it may quote input.
func (v *View) Crash(value any, stack []byte) {
	fmt.Fprintf(v.streams.Stderr, "kewplan crashed: %s\nThis is a bug in kewplan, not in your input: please report it at "+
		"https://github.com/kewplan/kewplan/issues with the command you ran (set KEWPLAN_DEBUG=1 for the trace).\n",
		termsafe.String(fmt.Sprint(value)))
	if len(stack) > 0 {
		fmt.Fprintf(v.streams.Stderr, "\n%s", termsafe.Text(string(stack)))
	}
}

// Version prints kewplan's version.
func (v *View) Version(version string) {
	fmt.Fprintf(v.streams.Stdout, "kewplan %s\n", version)
}
