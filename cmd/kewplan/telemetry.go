package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/kewplan/kewplan/runners"
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
run it records failed (see Status).

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
		f, err := os.Open(c.File)
		if err != nil {
			return fmt.Errorf("read stream: %w", err)
		}
		defer f.Close()
		in = f
	}
	m := r.NewMeter(c.Model)
	if err := runners.Feed(in, m, nil); err != nil {
		return fmt.Errorf("read stream %s: %w", name, err)
	}
	return views.NewTelemetry(views.ViewTypeOf(c.JSON), env.streams()).Totals(r.Name(), m.Totals())
}
