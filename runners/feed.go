package runners

import (
	"bytes"
	"io"
)

// feedChunk is Feed's read size and the buffer it starts with; the buffer grows only while a single line is
// longer than what it holds, up to MaxLineBytes+1, and shrinks back once that line is done.
const feedChunk = 64 << 10

// maxEmptyReads is how many successive (0, nil) reads Feed accepts before giving up, as bufio does.
const maxEmptyReads = 100

// Feed reads r to EOF, splitting on "\n" with bounded memory: every byte is copied verbatim to log (when not
// nil), each line of at most MaxLineBytes goes to m.Line, and a longer one to m.Oversized without being held in
// memory. It returns the first read or log-write error.
//
// A final line without "\n" (an agent killed mid-write) is still metered. After a log write fails, Feed keeps
// reading and metering so that the agent's stdout pipe never fills and stalls the container; it stops writing
// to log and returns that error at the end. Its buffer never exceeds MaxLineBytes+1 bytes, whatever the stream's
// length; an oversized line is dropped chunk by chunk as it arrives.
func Feed(r io.Reader, m Meter, log io.Writer) error {
	return feed(r, m, log, MaxLineBytes, feedChunk)
}

// feed is Feed with the line limit and chunk size as parameters, so that tests and fuzzing reach the growth and
// oversize paths with small inputs.
func feed(r io.Reader, m Meter, log io.Writer, maxLine, chunk int) error {
	buf := make([]byte, chunk)
	start, end := 0, 0 // buf[start:end] is the pending, unterminated line
	discarding := false
	empty := 0
	idle := 0 // reads since the buffer last needed to be larger than 4 chunks
	var logErr error
	for {
		if end == len(buf) {
			switch {
			case start > 0:
				end = copy(buf, buf[start:end])
				start = 0
			default: // one pending line fills the buffer; grow (the line is still at most MaxLineBytes)
				grown := make([]byte, min(2*len(buf), maxLine+1))
				end = copy(grown, buf[:end])
				buf = grown
			}
		}
		n, err := r.Read(buf[end:])
		if n > 0 {
			empty = 0
			if log != nil && logErr == nil {
				if _, werr := log.Write(buf[end : end+n]); werr != nil {
					logErr = werr
				}
			}
			scan := end
			end += n
			for {
				k := bytes.IndexByte(buf[scan:end], '\n')
				if k < 0 {
					break
				}
				k += scan
				if discarding {
					m.Oversized()
					discarding = false
				} else if k-start > maxLine {
					m.Oversized()
				} else {
					m.Line(buf[start:k])
				}
				start, scan = k+1, k+1
			}
			if !discarding && end-start > maxLine {
				discarding = true
			}
			if discarding {
				start, end = 0, 0 // drop the oversized line's bytes as they arrive
			}
			if start == end {
				start, end = 0, 0
			}
			if len(buf) > 4*chunk {
				// Give a long line's memory back once lines are short again for a while; shrinking after every
				// long line would regrow the buffer for each of a run of them.
				if end-start > 4*chunk || discarding {
					idle = 0
				} else if idle++; idle >= 64 && end-start <= chunk/2 {
					small := make([]byte, chunk)
					end = copy(small, buf[start:end])
					buf, start, idle = small, 0, 0
				}
			}
		} else if err == nil {
			if empty++; empty >= maxEmptyReads {
				err = io.ErrNoProgress
			}
		}
		if err != nil {
			switch {
			case discarding:
				m.Oversized()
			case end > start:
				m.Line(buf[start:end])
			}
			if logErr != nil {
				return logErr
			}
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
}
