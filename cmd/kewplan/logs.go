package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/kewplan/kewplan/internal/redact"
	"github.com/kewplan/kewplan/runners"
	"github.com/kewplan/kewplan/transcript"
	"github.com/kewplan/kewplan/views"
)

// LogsCmd is `kewplan logs`: a readable transcript of what an agent did, for the nodes of a recorded run
// (`RUN [NODE…]`, read from the ledger, live with --follow) or for a recorded stream (`--runner NAME FILE|-`).
type LogsCmd struct {
	Runner     string `placeholder:"NAME" help:"Render a recorded stream of this built-in runner: claude-code, opencode, pi, hermes or lemonade."`
	Protocol   string `placeholder:"PROTOCOL" help:"Render a recorded stream of a custom runner by its declared protocol: claude-code, opencode, pi or hermes."`
	Model      string `placeholder:"MODEL" help:"The routed model, shown when the stream names none (opencode never does)."`
	Node       string `placeholder:"NAME" help:"The node name a recorded stream's events carry (default: the file's name)."`
	StderrFile string `name:"stderr" placeholder:"FILE" help:"The same run's recorded stderr: its tail is shown when the agent failed, every line with --json."`

	JSON    bool `name:"json" help:"Print one normalised event per line (see the README for the schema)."`
	Raw     bool `help:"Print the stored stream verbatim (control characters are escaped on a terminal)."`
	NoPager bool `name:"no-pager" help:"Never page the output through $PAGER."`

	Follow   bool   `help:"Stream a running apply's nodes as they write, until the run ends (run form)."`
	Attempt  int    `placeholder:"N" help:"Show attempt N of a retried node instead of the last one (run form)."`
	StateDir string `name:"state-dir" placeholder:"DIR" help:"The state directory of the runs (default: .kewplan in the current directory)."`

	Args []string `arg:"" optional:"" placeholder:"RUN [NODE…] | FILE|-" help:"A run id (or latest) and node names; with --runner or --protocol, a recorded stdout file or - for standard input."`
}

// Help shows how the command is used.
func (LogsCmd) Help() string {
	return `Each event is one line or block: the assistant's text, each tool call with a one-line summary of its
input (▸ bash: echo hi), the tool's result cut to a few lines, errors marked ✗, each model call's tokens and
cost, and the run's totals at the end. Text from the stream is untrusted: control characters and bidirectional
overrides are shown escaped, never sent to the terminal. On a terminal, output longer than a screen goes
through $PAGER (less by default), as git log does.

A run's nodes come from the ledger, in the order they started, each with a header (runner, model, image,
status, duration, tokens, cost); --follow streams a running apply's nodes until the run ends, beside apply,
never blocking it. Credentials forwarded to a node are masked in its stored logs, so in every mode.

Example:
  kewplan logs latest
  kewplan logs latest --follow
  kewplan logs 20261130T101430Z-8f5b00 'fix["api"]' --json
  kewplan logs --runner claude-code run.ndjson
  kewplan logs --runner pi --json - < run.ndjson
  kewplan logs --protocol opencode --model anthropic/claude-sonnet-4.5 --stderr run.stderr run.ndjson`
}

// Run renders the transcript.
func (c *LogsCmd) Run(env *Env) error {
	if c.Runner == "" && c.Protocol == "" {
		return c.runForm(env)
	}
	protocol, label, err := c.protocol()
	if err != nil {
		return err
	}
	if len(c.Args) > 1 {
		return fmt.Errorf("a recorded stream is one FILE (or - for standard input), not %d arguments", len(c.Args))
	}
	if c.Follow || c.Attempt != 0 || c.StateDir != "" {
		return errors.New("--follow, --attempt and --state-dir belong to the run form (kewplan logs RUN [NODE…]), not to a recorded stream")
	}
	if c.Raw && c.JSON {
		return errors.New("--raw and --json cannot be combined: --raw prints the stream as stored, --json its normalised events")
	}
	in, name, closeIn, err := c.open(env)
	if err != nil {
		return err
	}
	defer closeIn()

	out := views.NewLogsOutput(env.streams(), views.LogsOutputOptions{Environ: env.Environ, NoPager: c.NoPager})
	err = c.render(out, in, name, protocol, label, credentialMasker(env.Environ))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// protocol resolves --runner or --protocol to a vocabulary and the label of the header.
func (c *LogsCmd) protocol() (protocol, label string, err error) {
	switch {
	case c.Runner != "" && c.Protocol != "":
		return "", "", errors.New("give --runner (a built-in runner) or --protocol (a custom runner's declared protocol), not both")
	case c.Runner != "":
		r, ok := runners.Builtin(c.Runner)
		if !ok {
			return "", "", fmt.Errorf("unknown runner %q: the built-in runners are %s; for a custom runner give its declared protocol with --protocol",
				c.Runner, strings.Join(runners.BuiltinNames(), ", "))
		}
		return r.Protocol(), r.Name(), nil
	default:
		for _, p := range runners.Protocols() {
			if p == c.Protocol {
				return p, "protocol " + p, nil
			}
		}
		return "", "", fmt.Errorf("unknown protocol %q: a runner's protocol is one of %s", c.Protocol, strings.Join(runners.Protocols(), ", "))
	}
}

func (c *LogsCmd) open(env *Env) (in io.Reader, name string, closeIn func(), err error) {
	file := ""
	if len(c.Args) == 1 {
		file = c.Args[0]
	}
	if file == "" || file == "-" {
		if env.StdinTTY {
			return nil, "", nil, errors.New("no stream to render: give a FILE, or pipe the recorded stream on standard input")
		}
		return env.Stdin, "stdin", func() {}, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, "", nil, fmt.Errorf("read stream: %w", err)
	}
	return f, filepath.Base(file), func() { f.Close() }, nil
}

func (c *LogsCmd) render(out *views.LogsOutput, in io.Reader, name, protocol, label string, mask *redact.Masker) error {
	if c.Raw {
		return out.Raw(in)
	}
	node := c.Node
	if node == "" {
		node = name
	}
	p, ok := transcript.New(node, protocol, c.Model)
	if !ok {
		return fmt.Errorf("no transcript for protocol %q", protocol)
	}
	p.Mask(mask)
	view := out.View(c.JSON)
	if err := view.Header(views.LogsHeader{Node: node, Runner: label, Model: c.Model}); err != nil {
		return err
	}
	if err := transcript.Scan(in, p, view.Event); err != nil {
		return fmt.Errorf("read stream %s: %w", name, err)
	}
	footer := views.LogsFooter{Totals: p.Totals()}
	if c.StderrFile != "" {
		if err := readStderr(c.StderrFile, c.JSON, p, view, &footer); err != nil {
			return err
		}
	}
	return view.Footer(footer)
}

// stderrTail is how many of the last stderr lines a failed run's footer shows.
const stderrTail = 10

// readStderr reads a node's stderr into the footer's tail and count, and with jsonLines emits every line.
func readStderr(path string, jsonLines bool, p *transcript.Parser, view views.LogsView, footer *views.LogsFooter) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("read stderr: %w", err)
	}
	defer f.Close()
	err = transcript.ScanStderr(f, p, func(e transcript.Event) error {
		footer.StderrLines++
		if len(footer.StderrTail) == stderrTail {
			footer.StderrTail = footer.StderrTail[1:]
		}
		footer.StderrTail = append(footer.StderrTail, e.Text)
		if jsonLines {
			return view.Event(e)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read stderr %s: %w", path, err)
	}
	return nil
}

// credentialMasker masks, in what a transcript decodes, the value of every built-in runner's credential set in
// kewplan's environment: the stored logs were masked as they were written, and this catches what only decoding
// shows (escapes undone, deltas joined). Values too short to mask are left, as apply leaves them.
func credentialMasker(environ []string) *redact.Masker {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	var values []string
	seen := map[string]bool{}
	for _, name := range runners.BuiltinNames() {
		r, _ := runners.Builtin(name)
		for _, c := range r.RequiredCredentials() {
			if v := env[c]; len(v) >= 6 && !seen[c] {
				seen[c] = true
				values = append(values, v)
			}
		}
	}
	return redact.New(values...)
}
