// Package jsonstream writes indented JSON documents the way encoding/json with json.Indent does, byte for byte,
// without holding a long top-level list's text whole: its elements are encoded in parallel batches and written in
// order. plan --json and saved plans use it for their nodes; every other JSON output of kewplan is one Indented
// call.
package jsonstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
)

// Indented writes v as one indented JSON document with a newline, HTML characters unescaped, and
// nothing at all when v does not encode.
func Indented(w io.Writer, v any) error {
	var compact bytes.Buffer
	enc := json.NewEncoder(&compact)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	// All of v is encoded before anything is written, in one Write.
	out := appendIndent(make([]byte, 0, compact.Len()*2), bytes.TrimSuffix(compact.Bytes(), []byte("\n")), "", "  ")
	_, err := w.Write(append(out, '\n'))
	return err
}

// ListBatch is how many elements of a streamed list one worker encodes into one buffer: large enough that a
// write and a hand-over are rare, small enough that the buffers in flight stay a few megabytes.
const ListBatch = 256

// IndentedList writes what Indented(w, v) writes when v's top-level array named key held the
// n elements elem returns, byte for byte, without holding the whole document: v must carry that array empty,
// and the elements are encoded in batches by GOMAXPROCS workers and written in order as each batch is ready.
// The document around the list is encoded before anything is written, so nothing at all is written when it
// does not encode; an element that does not encode stops the output there.
func IndentedList(w io.Writer, v any, key string, n int, elem func(i int) any) error {
	var doc bytes.Buffer
	if err := Indented(&doc, v); err != nil {
		return err
	}
	// At depth one, and only there, a key starts a line indented by two spaces; string values never hold a
	// raw newline, so this finds the list's own (empty) place.
	marker := []byte("\n  " + jsonString(key) + ": []")
	at := bytes.Index(doc.Bytes(), marker)
	if at < 0 {
		return fmt.Errorf("encoding JSON: the document has no empty top-level %q list to stream into", key)
	}
	head, tail := doc.Bytes()[:at+len(marker)-1], doc.Bytes()[at+len(marker)-1:] // split before the "]"
	if n == 0 {
		_, err := w.Write(doc.Bytes())
		return err
	}
	if _, err := w.Write(head); err != nil {
		return err
	}
	if err := writeListElements(w, n, elem); err != nil {
		return err
	}
	_, err := w.Write(append([]byte("\n  "), tail...))
	return err
}

// writeListElements writes elements 0..n-1 as they appear inside a depth-one array of an indented document,
// separated by commas, encoding batches in parallel and writing them in order. The few buffers in flight are
// reused, so the text of a long list costs a few batches' worth of memory, not its whole length.
func writeListElements(w io.Writer, n int, elem func(i int) any) error {
	type result struct {
		buf *bytes.Buffer
		err error
	}
	workers := runtime.GOMAXPROCS(0)
	free := make(chan *bytes.Buffer, workers+1)
	encode := func(start, end int) result {
		var buf *bytes.Buffer
		select {
		case buf = <-free:
			buf.Reset()
		default:
			buf = new(bytes.Buffer)
		}
		var compact bytes.Buffer
		enc := json.NewEncoder(&compact)
		enc.SetEscapeHTML(false)
		out := buf.Bytes()
		for i := start; i < end; i++ {
			compact.Reset()
			if err := enc.Encode(elem(i)); err != nil {
				return result{err: err}
			}
			out = append(out, "\n    "...)
			out = appendIndent(out, compact.Bytes()[:compact.Len()-1], "    ", "  ") // without the encoder's newline
			if i < n-1 {
				out = append(out, ',')
			}
		}
		return result{buf: bytes.NewBuffer(out)}
	}
	// pending holds the batches in flight in list order; its capacity bounds how many are encoded ahead.
	pending := make(chan chan result, workers)
	go func() {
		defer close(pending)
		for start := 0; start < n; start += ListBatch {
			done := make(chan result, 1)
			pending <- done
			go func() { done <- encode(start, min(start+ListBatch, n)) }()
		}
	}()
	var firstErr error
	for done := range pending {
		r := <-done
		if firstErr != nil {
			continue // drain, so that no encoder is left blocked
		}
		if r.err != nil {
			firstErr = r.err
			continue
		}
		if _, err := w.Write(r.buf.Bytes()); err != nil {
			firstErr = err
		}
		select {
		case free <- r.buf:
		default:
		}
	}
	return firstErr
}

// jsonString is s as a JSON string literal.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// Compacting returns a writer that passes what is written to w without the white space outside strings: what
// Indented writes becomes what encoding/json marshals, byte for byte (indenting only adds such white space, and
// a marshalled value has none). A digest of the compact encoding can so be computed from the streamed indented one.
func Compacting(w io.Writer) io.Writer { return &compactor{w: w} }

type compactor struct {
	w        io.Writer
	inString bool
	escaped  bool
	buf      []byte
}

func (c *compactor) Write(p []byte) (int, error) {
	c.buf = c.buf[:0]
	for _, b := range p {
		switch {
		case c.inString:
			switch {
			case c.escaped:
				c.escaped = false
			case b == '\\':
				c.escaped = true
			case b == '"':
				c.inString = false
			}
		case b == '"':
			c.inString = true
		case b == ' ' || b == '\t' || b == '\n' || b == '\r':
			continue
		}
		c.buf = append(c.buf, b)
	}
	if _, err := c.w.Write(c.buf); err != nil {
		return 0, err
	}
	return len(p), nil
}
