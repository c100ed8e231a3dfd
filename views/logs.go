package views

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dustin/go-humanize"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/internal/money"
	"github.com/kewplan/kewplan/internal/termsafe"
	"github.com/kewplan/kewplan/runners"
	"github.com/kewplan/kewplan/transcript"
)

// LogsHeader is what the caller knows about a node before its transcript: the ledger's record for a run, the
// flags for a recorded stream. Empty fields are left out.
type LogsHeader struct {
	Node     string
	Runner   string
	Model    string
	Image    string
	Status   string
	Reason   string // why the node did not succeed, from the ledger
	Attempt  int
	Duration time.Duration
	Totals   *runners.RunTotals // tokens and cost, when known before the transcript (the ledger's)
	// Meters are the node's brokered attempts as both meters saw them (the ledger's), shown under the reason.
	Meters []ledger.NodeMeters
	Source string // where the stream was read from, for a recorded stream
	// Continued marks a node's transcript taking the screen back from another one's (kewplan logs --follow, with
	// nodes running side by side): only its name is shown.
	Continued bool
}

// LogsFooter closes a node's transcript: the meter's totals over the whole stream, the process's exit code
// when known, and the agent's stderr.
type LogsFooter struct {
	Totals      runners.RunTotals
	ExitCode    *int
	StderrTail  []string // the last lines of stderr, shown when the agent failed
	StderrLines int64    // how many stderr lines there were in all
	Status      string   // the node's final status, when it was followed to its end
}

// logsOptions shape the human transcript.
type logsOptions struct {
	Color       bool // ANSI styling; the caller decides (terminal, --no-color, NO_COLOR)
	Width       int  // the terminal's width; tool output and summaries are cut to it (0: no limit)
	ResultLines int  // lines of a tool result shown before "… N more lines" (0: 5)
}

// LogsView renders transcripts, one node after another: Header, its events, Footer.
type LogsView interface {
	Header(LogsHeader) error
	Event(transcript.Event) error
	Footer(LogsFooter) error
}

// newLogsView returns the human view, or with jsonLines the JSON one (one normalised event per line).
func newLogsView(w io.Writer, jsonLines bool, opts logsOptions) LogsView {
	if jsonLines {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		return &logsJSON{enc: enc}
	}
	if opts.ResultLines <= 0 {
		opts.ResultLines = 5
	}
	return &logsHuman{w: w, o: opts}
}

// logsJSON writes each event as one JSON object per line. encoding/json escapes every control character and
// replaces invalid UTF-8, so the stream's text is inert in it.
type logsJSON struct{ enc *json.Encoder }

func (v *logsJSON) Header(LogsHeader) error        { return nil }
func (v *logsJSON) Footer(LogsFooter) error        { return nil }
func (v *logsJSON) Event(e transcript.Event) error { return v.enc.Encode(e) }

type logsHuman struct {
	w        io.Writer
	o        logsOptions
	err      error
	lastText string
	result   *transcript.Event
}

const (
	logsAnsiReset  = "\x1b[0m"
	logsAnsiBold   = "\x1b[1m"
	logsAnsiDim    = "\x1b[2m"
	logsAnsiRed    = "\x1b[31m"
	logsAnsiYellow = "\x1b[33m"
	logsAnsiCyan   = "\x1b[36m"
	logsAnsiGreen  = "\x1b[32m"
)

func (v *logsHuman) style(code, s string) string {
	if !v.o.Color || s == "" {
		return s
	}
	return code + s + logsAnsiReset
}

func (v *logsHuman) printf(format string, args ...any) {
	if v.err == nil {
		_, v.err = fmt.Fprintf(v.w, format, args...)
	}
}

// cut shortens one line to the terminal's width.
func (v *logsHuman) cut(s string, indent int) string {
	n := v.o.Width - indent
	if v.o.Width <= 0 || n < 20 || utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func (v *logsHuman) Header(h LogsHeader) error {
	if !h.Continued {
		v.lastText, v.result = "", nil
	}
	name := h.Node
	if name == "" {
		name = h.Source
	}
	parts := []string{}
	for _, s := range []string{h.Runner, h.Model} {
		if s != "" {
			parts = append(parts, termsafe.String(s))
		}
	}
	if h.Image != "" {
		parts = append(parts, "image "+termsafe.String(h.Image))
	}
	if h.Status != "" {
		parts = append(parts, termsafe.String(h.Status))
	}
	if h.Attempt > 0 {
		parts = append(parts, "attempt "+strconv.Itoa(h.Attempt))
	}
	if h.Duration > 0 {
		parts = append(parts, formatElapsed(h.Duration))
	}
	if h.Totals != nil {
		parts = append(parts, logsTokens(h.Totals.InputTokens, h.Totals.OutputTokens, h.Totals.CacheReadTokens, h.Totals.CacheWriteTokens))
		parts = append(parts, logsCost(h.Totals.CostUSD))
	}
	if h.Continued {
		parts = nil
	}
	v.printf("%s\n", v.style(logsAnsiBold, strings.Join(append([]string{"── " + termsafe.String(name)}, parts...), " · ")))
	if h.Reason != "" && !h.Continued {
		v.printf("  %s\n", v.style(logsAnsiYellow, v.cut(termsafe.String(h.Reason), 2)))
	}
	if !h.Continued {
		for _, m := range h.Meters {
			for i, line := range meterLines(m) {
				if i > 0 {
					line = v.style(logsAnsiYellow, line)
				}
				v.printf("  %s\n", line)
			}
		}
	}
	return v.err
}

func (v *logsHuman) Event(e transcript.Event) error {
	switch e.Kind {
	case transcript.KindText:
		v.text(e)
	case transcript.KindToolCall:
		v.printf("  %s\n", v.style(logsAnsiCyan, v.cut("▸ "+termsafe.String(e.Summary), 2)))
	case transcript.KindToolResult:
		v.toolResult(e)
	case transcript.KindError:
		msg := "✗ error: " + termsafe.String(e.Message)
		if e.Status != 0 {
			msg += fmt.Sprintf(" (HTTP %d)", e.Status)
		}
		v.printf("  %s\n", v.style(logsAnsiBold+logsAnsiRed, msg))
	case transcript.KindUsage:
		v.usage(e)
	case transcript.KindResult:
		v.resultEvent(e)
	case transcript.KindStderr:
		v.printf("  %s %s\n", v.style(logsAnsiYellow, "stderr │"), v.cut(termsafe.String(e.Text), 11))
	case transcript.KindUnparsed:
		what := "not an event"
		if e.Reason == transcript.ReasonOversized {
			what = "oversized line"
		}
		msg := fmt.Sprintf("⚠ line %d: %s (%s bytes): %s", e.Line, what, humanize.Comma(e.Bytes), termsafe.String(e.Excerpt))
		if e.Bytes > int64(len(e.Excerpt)) {
			msg += "…"
		}
		v.printf("  %s\n", v.style(logsAnsiYellow, msg))
	}
	return v.err
}

func (v *logsHuman) text(e transcript.Event) {
	body := strings.TrimRight(termsafe.Text(e.Text), "\n")
	body = strings.ReplaceAll(body, "\n", "\n  ")
	if e.Role == transcript.RoleReasoning {
		v.printf("  %s\n", v.style(logsAnsiDim, "~ "+strings.ReplaceAll(body, "\n  ", "\n  ~ ")))
		return
	}
	v.lastText = e.Text
	v.printf("  %s\n", body)
}

func (v *logsHuman) toolResult(e transcript.Event) {
	bar := v.style(logsAnsiDim, "│")
	if e.IsError {
		bar = v.style(logsAnsiRed, "✗")
	}
	out := strings.TrimRight(e.Output, "\n")
	if out == "" {
		v.printf("    %s %s\n", bar, v.style(logsAnsiDim, "(no output)"))
		return
	}
	lines := strings.Split(out, "\n")
	shown := min(len(lines), v.o.ResultLines)
	for _, l := range lines[:shown] {
		v.printf("    %s %s\n", bar, v.cut(termsafe.String(strings.TrimRight(l, "\r")), 6))
	}
	if rest := len(lines) - shown; rest > 0 {
		word := "lines"
		if rest == 1 {
			word = "line"
		}
		v.printf("    %s %s\n", bar, v.style(logsAnsiDim, fmt.Sprintf("… %s more %s", humanize.Comma(int64(rest)), word)))
	}
}

func (v *logsHuman) usage(e transcript.Event) {
	parts := []string{"model call"}
	if e.Model != "" {
		parts = append(parts, termsafe.String(e.Model))
	}
	parts = append(parts, logsTokenParts(e.InputTokens, e.OutputTokens, e.CacheReadTokens, e.CacheWriteTokens)...)
	if e.CostUSD != nil {
		parts = append(parts, logsCost(e.CostUSD))
	}
	if e.StopReason != "" {
		parts = append(parts, "stop "+termsafe.String(e.StopReason))
	}
	v.printf("  %s\n", v.style(logsAnsiDim, "· "+strings.Join(parts, " · ")))
}

func (v *logsHuman) resultEvent(e transcript.Event) {
	ev := e
	v.result = &ev
	if e.Text != "" && e.Text != v.lastText && !e.IsError {
		v.printf("  %s\n", v.style(logsAnsiBold, "final answer:"))
		v.text(transcript.Event{Kind: transcript.KindText, Role: transcript.RoleAssistant, Text: e.Text})
	}
	parts := []string{}
	if e.StopReason != "" {
		parts = append(parts, termsafe.String(e.StopReason))
	}
	if e.Reason == "eof" {
		parts = append(parts, "the stream ended without its final event")
	}
	if e.Turns != nil {
		parts = append(parts, logsPlural(*e.Turns, "turn", "turns"))
	}
	if e.DurationMS != nil {
		parts = append(parts, formatElapsed(time.Duration(*e.DurationMS)*time.Millisecond))
	}
	if e.ExitCode != nil {
		parts = append(parts, "exit "+strconv.FormatInt(*e.ExitCode, 10))
	}
	if e.IsError {
		v.printf("  %s\n", v.style(logsAnsiBold+logsAnsiRed, "✗ failed: "+strings.Join(parts, " · ")))
		return
	}
	v.printf("  %s\n", v.style(logsAnsiGreen, "■ done: "+strings.Join(parts, " · ")))
}

func (v *logsHuman) Footer(f LogsFooter) error {
	t := f.Totals
	parts := []string{logsTokens(t.InputTokens, t.OutputTokens, t.CacheReadTokens, t.CacheWriteTokens), logsCost(t.CostUSD)}
	if t.Model != "" {
		parts = append(parts, termsafe.String(t.Model))
	}
	if v.result != nil && v.result.StopReason != "" {
		parts = append(parts, "stop "+termsafe.String(v.result.StopReason))
	}
	failed := t.IsError
	switch {
	case f.ExitCode != nil:
		parts = append(parts, "exit "+strconv.Itoa(*f.ExitCode))
		failed = failed || *f.ExitCode != 0
	case v.result != nil && v.result.ExitCode != nil:
		parts = append(parts, "exit "+strconv.FormatInt(*v.result.ExitCode, 10))
	}
	if t.UnparsedLines+t.OversizedLines > 0 {
		parts = append(parts, logsPlural(t.UnparsedLines+t.OversizedLines, "line", "lines")+" not events")
	}
	label := "totals"
	if failed {
		label = "totals (failed)"
	}
	if f.Status != "" {
		label = termsafe.String(f.Status) + ", totals"
	}
	v.printf("%s %s\n", v.style(logsAnsiBold, "── "+label+":"), strings.Join(parts, " · "))
	if failed && len(f.StderrTail) > 0 {
		v.printf("%s\n", v.style(logsAnsiYellow, fmt.Sprintf("── stderr, last %d of %s lines:", len(f.StderrTail), humanize.Comma(f.StderrLines))))
		for _, l := range f.StderrTail {
			v.printf("  %s\n", v.cut(termsafe.String(l), 2))
		}
	} else if f.StderrLines > 0 {
		v.printf("%s\n", v.style(logsAnsiDim, fmt.Sprintf("── stderr: %s lines (--json shows them)", humanize.Comma(f.StderrLines))))
	}
	return v.err
}

func logsTokenParts(in, out, cr, cw *int64) []string {
	var parts []string
	for _, x := range []struct {
		n    *int64
		what string
	}{{in, "in"}, {out, "out"}, {cr, "cache read"}, {cw, "cache write"}} {
		if x.n != nil {
			parts = append(parts, humanize.Comma(*x.n)+" "+x.what)
		}
	}
	return parts
}

func logsTokens(in, out, cr, cw int64) string {
	return strings.Join(logsTokenParts(&in, &out, &cr, &cw), " · ")
}

func logsCost(c *float64) string {
	if c == nil {
		return "cost not reported"
	}
	return money.USD(*c)
}

func logsPlural(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return humanize.Comma(n) + " " + many
}
