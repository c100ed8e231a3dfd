package transcript

import (
	"bufio"
	"bytes"
	"io"

	"github.com/kewplan/kewplan/runners"
)

// Stream reads one node's stdout incrementally, in chunks of any size as they arrive (a log that is still being
// written, followed as tail -f does). It splits on "\n" only and never holds a line longer than
// runners.MaxLineBytes whole: its first bytes are kept for the excerpt and the rest is counted as it streams past.
// It is not safe for concurrent use.
type Stream struct {
	p    *Parser
	line []byte
	over int64 // bytes of the current line beyond what line holds, once it is oversized
}

// NewStream starts reading a stdout into p.
func NewStream(p *Parser) *Stream { return &Stream{p: p} }

// Write reads chunk and hands the events of every line it completes to emit. It stops at emit's first error.
func (s *Stream) Write(chunk []byte, emit func(Event) error) error {
	for len(chunk) > 0 {
		part, rest, full := chunk, []byte(nil), false
		if i := bytes.IndexByte(chunk, '\n'); i >= 0 {
			part, rest, full = chunk[:i], chunk[i+1:], true
		}
		s.add(part)
		if full {
			if err := s.endLine(emit); err != nil {
				return err
			}
		}
		chunk = rest
	}
	return nil
}

// Pending reports whether an unterminated line is held.
func (s *Stream) Pending() bool { return len(s.line) > 0 || s.over > 0 }

// End reads the last line even without its "\n", then ends the stream (Parser.Finish).
func (s *Stream) End(emit func(Event) error) error {
	if s.Pending() {
		if err := s.endLine(emit); err != nil {
			return err
		}
	}
	return send(s.p.Finish(), emit)
}

func (s *Stream) add(part []byte) {
	switch {
	case s.over > 0:
		s.over += int64(len(part))
	case len(s.line)+len(part) > runners.MaxLineBytes:
		keep := max(0, ExcerptBytes-len(s.line))
		keep = min(keep, len(part))
		s.line = append(s.line, part[:keep]...)
		s.over = int64(len(part) - keep)
	default:
		s.line = append(s.line, part...)
	}
}

func (s *Stream) endLine(emit func(Event) error) error {
	var evs []Event
	if s.over > 0 {
		evs = s.p.Oversized(s.line, int64(len(s.line))+s.over)
	} else {
		evs = s.p.Line(s.line)
	}
	s.line, s.over = s.line[:0], 0
	if cap(s.line) > 4*MaxDecodeBytes {
		s.line = nil // give a long line's memory back
	}
	return send(evs, emit)
}

func send(evs []Event, emit func(Event) error) error {
	for _, e := range evs {
		if err := emit(e); err != nil {
			return err
		}
	}
	return nil
}

// Scan reads one node's stdout from r to EOF, splitting on "\n" only, and hands every event to emit, the
// Finish events included. A line longer than runners.MaxLineBytes is never held whole (see Stream). It stops at
// the first error of r or emit.
func Scan(r io.Reader, p *Parser, emit func(Event) error) error {
	s := NewStream(p)
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if e := s.Write(buf[:n], emit); e != nil {
				return e
			}
		}
		switch {
		case err == io.EOF:
			return s.End(emit)
		case err != nil:
			return err
		}
	}
}

// maxStderrLine caps one stderr line in its event; the rest of the line is dropped as it streams past.
const maxStderrLine = 64 << 10

// ScanStderr reads one node's stderr from r to EOF and hands each line to emit as a stderr event, numbered from
// 1, with at most 64 KiB of any line kept. It stops at the first error of r or emit.
func ScanStderr(r io.Reader, p *Parser, emit func(Event) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	var n int64
	for {
		chunk, err := br.ReadSlice('\n')
		full := err == nil
		if full {
			chunk = chunk[:len(chunk)-1]
		}
		if room := maxStderrLine - len(line); room > 0 {
			line = append(line, chunk[:min(room, len(chunk))]...)
		}
		if full || (err == io.EOF && len(line) > 0) {
			n++
			if e := emit(p.Stderr(truncUTF8(line, maxStderrLine), n)); e != nil {
				return e
			}
			line = line[:0]
		}
		switch {
		case err == nil, err == bufio.ErrBufferFull:
			continue
		case err == io.EOF:
			return nil
		default:
			return err
		}
	}
}
