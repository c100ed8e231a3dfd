package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/url"
	"sort"
	"strings"
)

// Mask replaces every occurrence of a secret's forms. It holds no JSON metacharacter, so a masked JSON line
// stays valid JSON.
const Mask = "[MASKED]"

// minEmbeddedBytes is the shortest secret whose partial base64 forms (a secret embedded at any alignment in a
// longer base64 stream) are masked: below it, those few characters would match ordinary base64 text by chance.
const minEmbeddedBytes = 8

// Forms lists what is masked for one secret, longest first, without duplicates: the value; its standard and
// URL-safe base64, padded and raw; the base64 characters that depend only on the secret when it sits at each of
// the three alignments inside a longer base64 stream (secrets of 8 bytes or more); its query- and
// path-escaped forms, with upper- and lower-case hex; and its JSON-escaped form. An empty secret has none.
func Forms(secret string) []string {
	if secret == "" {
		return nil
	}
	forms := []string{secret}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		forms = append(forms, enc.EncodeToString([]byte(secret)))
	}
	if len(secret) >= minEmbeddedBytes {
		for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
			forms = append(forms, embedded(enc, secret)...)
		}
	}
	for _, esc := range []string{url.QueryEscape(secret), url.PathEscape(secret)} {
		forms = append(forms, esc, lowerHex(esc))
	}
	if b, err := json.Marshal(secret); err == nil {
		forms = append(forms, string(b[1:len(b)-1]))
	}
	return dedupe(forms)
}

// embedded returns, for a secret starting at byte offset 0, 1 and 2 of a 3-byte base64 group, the run of base64
// characters that are determined by the secret's bytes alone: the characters mixing in a neighbouring byte at
// either end are dropped.
func embedded(enc *base64.Encoding, secret string) []string {
	var out []string
	for off := 0; off < 3; off++ {
		buf := append(make([]byte, off), secret...)
		s := enc.EncodeToString(buf)
		skip := (off*8 + 5) / 6          // characters touching the prefix bytes
		end := len(buf) * 8 / 6          // characters wholly inside the data
		if end-skip >= 2*len(secret)/3 { // keep only long, specific runs
			out = append(out, s[skip:end])
		}
	}
	return out
}

// lowerHex turns the %XX escapes of s into %xx, the form some encoders write.
func lowerHex(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1] = toLower(b[i+1])
			b[i+2] = toLower(b[i+2])
		}
	}
	return string(b)
}

func toLower(c byte) byte {
	if 'A' <= c && c <= 'F' {
		return c + 'a' - 'A'
	}
	return c
}

func dedupe(forms []string) []string {
	sort.SliceStable(forms, func(i, j int) bool { return len(forms[i]) > len(forms[j]) })
	out := forms[:0]
	seen := map[string]bool{}
	for _, f := range forms {
		if f != "" && !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	return out
}

// Writer masks secrets in what is written through it. It is not safe for concurrent use. Call Flush (or Close)
// after the last Write: up to the longest form's length minus one byte is held back until then, never a complete
// line (unless a secret itself holds a newline).
type Writer struct {
	w       io.Writer
	forms   [][]byte // longest first
	maxLen  int
	pending []byte
	next    []int // per form: index in the current buffer of its next occurrence at or after the scan, or -1
	// lines is true when no form holds a "\n": nothing is then held back past a line's end, so that a stream
	// read line by line as it is written (kewplan logs --follow) sees each complete line at once.
	lines bool
}

// NewWriter returns a Writer to w masking every form of every non-empty secret. With no secret it still works,
// and holds nothing back.
func NewWriter(w io.Writer, secrets []string) *Writer {
	var all []string
	for _, s := range secrets {
		all = append(all, Forms(s)...)
	}
	all = dedupe(all)
	m := &Writer{w: w}
	for _, f := range all {
		m.forms = append(m.forms, []byte(f))
		m.maxLen = max(m.maxLen, len(f))
	}
	m.next = make([]int, len(m.forms))
	m.lines = true
	for _, f := range m.forms {
		m.lines = m.lines && bytes.IndexByte(f, '\n') < 0
	}
	return m
}

// Write masks p with what was held back and writes every byte that can no longer be the start of a secret. It
// reports len(p) on success, although some bytes may be held until the next Write or Flush.
func (m *Writer) Write(p []byte) (int, error) {
	if len(m.forms) == 0 {
		return m.w.Write(p)
	}
	buf := append(m.pending, p...)
	limit := len(buf) - (m.maxLen - 1)
	if m.lines {
		// A form without "\n" that starts before the last line's end also ends before it.
		limit = max(limit, bytes.LastIndexByte(buf, '\n')+1)
	}
	out, rest := m.mask(buf, limit)
	m.pending = append(m.pending[:0:0], rest...)
	if len(out) > 0 {
		if _, err := m.w.Write(out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Flush masks and writes what was held back.
func (m *Writer) Flush() error {
	if len(m.pending) == 0 {
		return nil
	}
	out, _ := m.mask(m.pending, len(m.pending))
	m.pending = m.pending[:0]
	_, err := m.w.Write(out)
	return err
}

// Close flushes; it does not close the underlying writer.
func (m *Writer) Close() error { return m.Flush() }

// mask replaces, leftmost first and longest at one position, every form starting before limit (where every
// form that could start there is wholly inside buf), and returns the bytes to write and those to hold back.
func (m *Writer) mask(buf []byte, limit int) (out, rest []byte) {
	if limit <= 0 {
		return nil, buf
	}
	for k := range m.next {
		m.next[k] = -2 // not searched yet
	}
	out = make([]byte, 0, len(buf))
	last := 0
	for last < limit {
		best, bestK := -1, -1
		for k, f := range m.forms {
			if m.next[k] != -1 && m.next[k] < last {
				if i := bytes.Index(buf[last:], f); i >= 0 {
					m.next[k] = last + i
				} else {
					m.next[k] = -1
				}
			}
			if i := m.next[k]; i >= 0 && i < limit && (best < 0 || i < best) {
				best, bestK = i, k // forms are longest first: at a tie the earlier k is the longer
			}
		}
		if best < 0 {
			break
		}
		out = append(out, buf[last:best]...)
		out = append(out, Mask...)
		last = best + len(m.forms[bestK])
	}
	if last < limit {
		out = append(out, buf[last:limit]...)
		last = limit
	}
	return out, buf[last:]
}

// String masks every form of the secrets in s: for the ledger's and events' strings and for messages.
func String(s string, secrets []string) string {
	var b strings.Builder
	w := NewWriter(&b, secrets)
	w.Write([]byte(s))
	w.Flush()
	return b.String()
}
