package views

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"strings"

	"golang.org/x/term"

	"github.com/kewplan/kewplan/internal/termsafe"
)

// LogsOutputOptions say where `kewplan logs` may page.
type LogsOutputOptions struct {
	Environ []string // the process environment: $PAGER, $LESS
	NoPager bool     // --no-pager, and --follow (a stream that never ends is not paged)
}

// LogsOutput is where `kewplan logs` writes: stdout, or on a terminal $PAGER once the output is longer than a
// screen, as git log does. It hands out the transcript views and copies raw streams; Close flushes and waits
// for the pager.
type LogsOutput struct {
	s     Streams
	w     io.Writer
	paged *pagedOutput
	width int
}

// NewLogsOutput returns the output over s.
func NewLogsOutput(s Streams, o LogsOutputOptions) *LogsOutput {
	out := &LogsOutput{s: s, w: s.Stdout}
	f, ok := s.Stdout.(*os.File)
	if !ok || !s.Terminal {
		return out
	}
	width, rows, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return out
	}
	out.width = width
	if pager := pagerCommand(o.Environ); !o.NoPager && pager != "" && rows > 1 {
		out.paged = &pagedOutput{out: f, rows: rows - 1, command: pager, environ: o.Environ, stderr: s.Stderr}
		out.w = out.paged
	}
	return out
}

// View returns the transcript view writing to this output: human (coloured and cut to the terminal's width
// when the streams allow) or, with jsonLines, one normalised event per line.
func (o *LogsOutput) View(jsonLines bool) LogsView {
	return newLogsView(o.w, jsonLines, logsOptions{Color: o.s.Color && o.s.Terminal, Width: o.width})
}

// Raw prints a stored stream as it is. On a terminal its control characters are escaped: the stored bytes are
// agent output and must never drive the terminal; piped, they are copied byte for byte.
func (o *LogsOutput) Raw(in io.Reader) error {
	if !o.s.Terminal {
		_, err := io.Copy(o.w, in)
		return err
	}
	br := bufio.NewReaderSize(in, 64<<10)
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			if werr := o.RawChunk(chunk); werr != nil {
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

// RawChunk prints a piece of a stored stream as Raw does, for a log followed as it grows. On a terminal a chunk
// should end at a line's end, so that an escape is never split.
func (o *LogsOutput) RawChunk(chunk []byte) error {
	if !o.s.Terminal {
		_, err := o.w.Write(chunk)
		return err
	}
	_, err := io.WriteString(o.w, termsafe.Text(string(chunk)))
	return err
}

// Close writes what is held and waits for the pager, if one was started.
func (o *LogsOutput) Close() error {
	if o.paged == nil {
		return nil
	}
	return o.paged.finish()
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
	} else {
		p.direct = true
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
		p.buf.Reset()
		return err
	}
	p.pipe.Close()
	_ = p.cmd.Wait() // quitting the pager early is not an error
	return nil
}
