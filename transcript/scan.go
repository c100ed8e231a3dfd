package transcript

import (
	"bufio"
	"io"

	"github.com/kewplan/kewplan/runners"
)

// Scan reads one node's stdout from r to EOF, splitting on "\n" only, and hands every event to emit, the
// Finish events included. A line longer than runners.MaxLineBytes is never held whole: its first bytes are
// kept for the excerpt and the rest is counted as it streams past. It stops at the first error of r or emit.
func Scan(r io.Reader, p *Parser, emit func(Event) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	var over int64 // bytes of the current line beyond what line holds, once it is oversized
	send := func(evs []Event) error {
		for _, e := range evs {
			if err := emit(e); err != nil {
				return err
			}
		}
		return nil
	}
	for {
		chunk, err := br.ReadSlice('\n')
		full := err == nil
		if full {
			chunk = chunk[:len(chunk)-1]
		}
		switch {
		case over > 0:
			over += int64(len(chunk))
		case len(line)+len(chunk) > runners.MaxLineBytes:
			keep := max(0, ExcerptBytes-len(line))
			keep = min(keep, len(chunk))
			line = append(line, chunk[:keep]...)
			over = int64(len(chunk) - keep)
		default:
			line = append(line, chunk...)
		}
		if full || (err == io.EOF && (len(line) > 0 || over > 0)) {
			var evs []Event
			if over > 0 {
				evs = p.Oversized(line, int64(len(line))+over)
			} else {
				evs = p.Line(line)
			}
			if e := send(evs); e != nil {
				return e
			}
			line, over = line[:0], 0
			if cap(line) > 4*MaxDecodeBytes {
				line = nil // give a long line's memory back
			}
		}
		switch {
		case err == nil, err == bufio.ErrBufferFull:
			continue
		case err == io.EOF:
			return send(p.Finish())
		default:
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
