package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/kewplan/kewplan/internal/safefile"
	"github.com/kewplan/kewplan/runners"
	"github.com/kewplan/kewplan/transcript"
	"github.com/kewplan/kewplan/views"
)

// TelemetryCmd meters a recorded agent stream offline: how an operator re-checks a run's bill or log, and how
// every meter is checked against real captures.
type TelemetryCmd struct {
	Runner string `required:"" placeholder:"NAME" help:"Runner whose stdout vocabulary the stream speaks: claude-code, opencode, pi, hermes or lemonade."`
	Model  string `placeholder:"MODEL" help:"The routed model, reported when the stream names none (opencode never does)."`
	JSON   bool   `name:"json" help:"Print the totals as JSON; cost_usd is null when the agent reported no cost."`
	File   string `arg:"" optional:"" placeholder:"FILE|-" help:"Recorded stdout of one run; - or nothing reads standard input."`
}

// Help shows how the command is used.
func (TelemetryCmd) Help() string {
	return `The stream is metered exactly as a live run is: one JSON event per line, unknown event types and
non-JSON lines tolerated and counted. The exit status is 0 whenever the stream could be read, also when the
run it records failed (see Status); 1 when it cannot be read, or when no line is an event of the runner's
vocabulary (bytes that are no stream, or the wrong --runner).

Example:
  kewplan telemetry --runner claude-code run.ndjson
  kewplan telemetry --runner opencode --model anthropic/claude-sonnet-4.5 --json - < run.ndjson`
}

// Run meters the stream and prints its totals.
func (c TelemetryCmd) Run(env *Env) error {
	r, ok := runners.Builtin(c.Runner)
	if !ok {
		return fmt.Errorf("unknown runner %q: the known runners are %s", c.Runner, strings.Join(runners.BuiltinNames(), ", "))
	}
	var in io.Reader
	name := c.File
	switch c.File {
	case "", "-":
		if env.StdinTTY {
			return errors.New("no stream to meter: give a FILE, or pipe the recorded stream on standard input")
		}
		in, name = env.Stdin, "standard input"
	default:
		// A FIFO or a device is refused at once, never waited on; the stream itself is read line by line with
		// bounded memory, so there is no size limit.
		f, err := safefile.Open(c.File, 0)
		if err != nil {
			return fmt.Errorf("read stream: %w", err)
		}
		defer f.Close()
		in = f
	}
	m, err := newRecognising(r, c.Model)
	if err != nil {
		return err
	}
	if err := runners.Feed(in, m, nil); err != nil {
		return fmt.Errorf("read stream %s: %w", name, err)
	}
	totals := m.Totals()
	if !m.recognised(totals) {
		return fmt.Errorf("%s is no stream of the %s runner: no line is an event of its vocabulary (%d %s: %d JSON, %d not JSON, %d oversized), so there is nothing to meter. Give the recorded stdout of one %s run, or the --runner that wrote it",
			name, r.Name(), m.lines, plural(m.lines, "line", "lines"), totals.Events, totals.UnparsedLines, totals.OversizedLines, r.Name())
	}
	return views.NewTelemetry(views.ViewTypeOf(c.JSON), env.streams()).Totals(r.Name(), totals)
}

// recognising meters a stream through the transcript parser, which knows each vocabulary's event types, and
// counts the lines that made an event: a file of JSON objects of no known type (or no JSON at all) is no stream,
// and metering it would report "Status ok" over nothing.
type recognising struct {
	p      *transcript.Parser
	lines  int64
	events int64 // transcript events other than unparsed lines
}

func newRecognising(r runners.Runner, model string) (*recognising, error) {
	p, ok := transcript.New("telemetry", r.Protocol(), model)
	if !ok {
		return nil, fmt.Errorf("runner %s speaks protocol %q, which kewplan cannot read", r.Name(), r.Protocol())
	}
	return &recognising{p: p}, nil
}

func (m *recognising) Line(line []byte) {
	m.lines++
	m.count(m.p.Line(line))
}

func (m *recognising) Oversized() {
	m.lines++
	m.p.Oversized(nil, runners.MaxLineBytes+1)
}

func (m *recognising) Totals() runners.RunTotals { return m.p.Totals() }

func (m *recognising) count(evs []transcript.Event) {
	for _, e := range evs {
		if e.Kind != transcript.KindUnparsed {
			m.events++
		}
	}
}

// recognised says whether anything of the vocabulary was seen: an event, or what the meter reads from lines
// that make no event (a session, a reported model, tokens, the terminal event).
func (m *recognising) recognised(t runners.RunTotals) bool {
	return m.events > 0 || t.Finished || t.SessionID != "" || t.ModelSource == runners.ModelReported ||
		t.InputTokens > 0 || t.OutputTokens > 0 || t.CostUSD != nil
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
