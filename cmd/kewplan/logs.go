package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/term"

	"github.com/kewplan/kewplan/runners"
	"github.com/kewplan/kewplan/transcript"
	"github.com/kewplan/kewplan/views"
)

// LogsCmd is `kewplan logs`: a readable transcript of what an agent did. Phase 1 renders a recorded stream
// (`--runner NAME FILE|-`); the run form (`RUN [NODE…]`, reading the ledger, --follow, --attempt) is declared
// here and arrives with phase 2.
type LogsCmd struct {
	Runner   string `placeholder:"NAME" help:"Render a recorded stream of this built-in runner: claude-code, opencode, pi, hermes or lemonade."`
	Protocol string `placeholder:"PROTOCOL" help:"Render a recorded stream of a custom runner by its declared protocol: claude-code, opencode, pi or hermes."`
	Model    string `placeholder:"MODEL" help:"The routed model, shown when the stream names none (opencode never does)."`
	Node     string `placeholder:"NAME" help:"The node name a recorded stream's events carry (default: the file's name)."`
	Stderr   string `placeholder:"FILE" help:"The same run's recorded stderr: its tail is shown when the agent failed, every line with --json."`

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

Example:
  kewplan logs --runner claude-code run.ndjson
  kewplan logs --runner pi --json - < run.ndjson
  kewplan logs --protocol opencode --model anthropic/claude-sonnet-4.5 --stderr run.stderr run.ndjson`
}

// Run renders the transcript.
func (c *LogsCmd) Run(env *Env) error {
	if c.Runner == "" && c.Protocol == "" {
		return c.runForm()
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

	out, finish := c.output(env)
	err = c.render(env, out, in, name, protocol, label)
	if ferr := finish(); err == nil {
		err = ferr
	}
	return err
}

// runForm is the run form, which needs the ledger (phase 2).
func (c *LogsCmd) runForm() error {
	if len(c.Args) == 0 {
		return errors.New("name a run (or latest), or render a recorded stream with --runner NAME FILE")
	}
	state := c.StateDir
	if state == "" {
		state = ".kewplan"
	}
	return fmt.Errorf("kewplan logs RUN is not available yet (it reads the ledger; coming next). A run's streams are stored as %s; render one with: kewplan logs --runner NAME --stderr %s %s",
		filepath.Join(state, "logs", "RUN", "NODE.stdout.log"),
		filepath.Join(state, "logs", "RUN", "NODE.stderr.log"),
		filepath.Join(state, "logs", "RUN", "NODE.stdout.log"))
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

func (c *LogsCmd) render(env *Env, out io.Writer, in io.Reader, name, protocol, label string) error {
	if c.Raw {
		return copyRaw(out, in, env.Terminal)
	}
	node := c.Node
	if node == "" {
		node = name
	}
	p, ok := transcript.New(node, protocol, c.Model)
	if !ok {
		return fmt.Errorf("no transcript for protocol %q", protocol)
	}
	width := 0
	if f, ok := env.Stdout.(*os.File); ok && env.Terminal {
		width, _, _ = term.GetSize(int(f.Fd()))
	}
	view := views.NewLogsView(out, c.JSON, views.LogsOptions{Color: env.Terminal && !env.NoColor, Width: width})
	if err := view.Header(views.LogsHeader{Node: node, Runner: label, Model: c.Model}); err != nil {
		return err
	}
	if err := transcript.Scan(in, p, view.Event); err != nil {
		return fmt.Errorf("read stream %s: %w", name, err)
	}
	footer := views.LogsFooter{Totals: p.Totals()}
	if c.Stderr != "" {
		if err := c.readStderr(p, view, &footer); err != nil {
			return err
		}
	}
	return view.Footer(footer)
}

// stderrTail is how many of the last stderr lines a failed run's footer shows.
const stderrTail = 10

func (c *LogsCmd) readStderr(p *transcript.Parser, view views.LogsView, footer *views.LogsFooter) error {
	f, err := os.Open(c.Stderr)
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
		if c.JSON {
			return view.Event(e)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read stderr %s: %w", c.Stderr, err)
	}
	return nil
}

// copyRaw prints the stream as stored. On a terminal its control characters are escaped: the stored bytes are
// agent output and must never drive the terminal; piped, they are copied byte for byte.
func copyRaw(out io.Writer, in io.Reader, terminal bool) error {
	if !terminal {
		_, err := io.Copy(out, in)
		return err
	}
	br := bufio.NewReaderSize(in, 64<<10)
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			if _, werr := io.WriteString(out, views.EscapeTerminal(string(chunk), true)); werr != nil {
				return werr
			}
		}
		switch {
		case err == nil, err == bufio.ErrBufferFull:
		case err == io.EOF:
			return nil
		default:
			return err
		}
	}
}

// output returns where the transcript is written: stdout, or on a terminal $PAGER once the output is longer
// than a screen. finish flushes and waits for the pager.
func (c *LogsCmd) output(env *Env) (io.Writer, func() error) {
	f, ok := env.Stdout.(*os.File)
	if c.NoPager || !env.Terminal || !ok {
		return env.Stdout, func() error { return nil }
	}
	_, rows, err := term.GetSize(int(f.Fd()))
	pager := pagerCommand(env.Environ)
	if err != nil || rows <= 0 || pager == "" {
		return env.Stdout, func() error { return nil }
	}
	p := &pagedOutput{out: f, rows: rows - 1, command: pager, environ: env.Environ, stderr: env.Stderr}
	return p, p.finish
}

// pagerCommand is $PAGER, or less when it is unset; "" or cat mean no pager.
func pagerCommand(environ []string) string {
	pager, set := "", false
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "PAGER="); ok {
			pager, set = v, true
		}
	}
	if !set {
		if _, err := exec.LookPath("less"); err != nil {
			return ""
		}
		return "less"
	}
	if strings.TrimSpace(pager) == "cat" {
		return ""
	}
	return strings.TrimSpace(pager)
}

// pagedOutput holds the first screenful; when the output outgrows it, it starts the pager and hands it what it
// held and everything after. Output that fits on one screen is written directly, as git does.
type pagedOutput struct {
	out     *os.File
	rows    int
	command string
	environ []string
	stderr  io.Writer
	buf     bytes.Buffer
	lines   int
	cmd     *exec.Cmd
	pipe    io.WriteCloser
	direct  bool
}

func (p *pagedOutput) Write(b []byte) (int, error) {
	switch {
	case p.pipe != nil:
		return p.pipe.Write(b)
	case p.direct:
		return p.out.Write(b)
	}
	p.buf.Write(b)
	p.lines += bytes.Count(b, []byte{'\n'})
	if p.lines < p.rows {
		return len(b), nil
	}
	if err := p.start(); err != nil {
		p.direct = true // no pager after all: print as if there were none
	}
	w := io.Writer(p.out)
	if p.pipe != nil {
		w = p.pipe
	}
	_, err := w.Write(p.buf.Bytes())
	p.buf.Reset()
	return len(b), err
}

func (p *pagedOutput) start() error {
	cmd := exec.Command("/bin/sh", "-c", p.command)
	env := p.environ
	hasLess := false
	for _, kv := range env {
		hasLess = hasLess || strings.HasPrefix(kv, "LESS=")
	}
	if !hasLess {
		// Quit when the text fits, keep colours, do not clear the screen: git's defaults.
		env = append(env[:len(env):len(env)], "LESS=FRX")
	}
	cmd.Env, cmd.Stdout, cmd.Stderr = env, p.out, p.stderr
	pipe, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	p.cmd, p.pipe = cmd, pipe
	return nil
}

func (p *pagedOutput) finish() error {
	if p.pipe == nil {
		_, err := p.out.Write(p.buf.Bytes())
		return err
	}
	p.pipe.Close()
	_ = p.cmd.Wait() // quitting the pager early is not an error
	return nil
}
