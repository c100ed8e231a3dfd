package redact

import (
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/url"
	"sort"
	"strings"
	"unicode/utf8"
)

// Mask replaces every occurrence of a secret's forms. It holds no JSON metacharacter, so a masked JSON line
// stays valid JSON.
const Mask = "[MASKED]"

// minEmbeddedBytes is the shortest secret whose partial base64 forms (a secret embedded at any alignment in a
// longer base64 stream) are masked: below it, those few characters would match ordinary base64 text by chance.
const minEmbeddedBytes = 8

// Partial runs: a run of at least partialRun(len) consecutive bytes of a secret is masked wherever it is, so that
// a secret split in two (across two events, or cut by an excerpt) leaves at most the shorter part, of fewer than
// that many bytes, in clear.
const (
	minPartialRun = 8
	maxPartialRun = 16
	// maxPartialWindow bounds the trie of a long secret's runs: a run longer than this is masked in pieces.
	maxPartialWindow = 64
)

func partialRun(n int) int { return min(maxPartialRun, max(minPartialRun, n/2)) }

// Forms lists the encodings of one secret that are masked as spelled, longest first, without duplicates: the
// value; its standard and URL-safe base64, padded and raw; the base64 characters that depend only on the secret
// when it sits at each of the three alignments inside a longer base64 stream (secrets of 8 bytes or more); its
// hex in lower and upper case; its base32, padded and raw; the value reversed; its query- and path-escaped forms;
// and its JSON-escaped form. An empty secret has none.
//
// The masker matches every form after decoding what a reader of the stream would decode (see Masker), so that
// the escaped forms are only a few of the spellings it masks.
func Forms(secret string) []string {
	if secret == "" {
		return nil
	}
	b := []byte(secret)
	forms := []string{secret}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		forms = append(forms, enc.EncodeToString(b))
	}
	if len(secret) >= minEmbeddedBytes {
		for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
			forms = append(forms, embedded(enc, secret)...)
		}
	}
	h := hex.EncodeToString(b)
	forms = append(forms, h, strings.ToUpper(h))
	forms = append(forms, base32.StdEncoding.EncodeToString(b), base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
	forms = append(forms, reverse(secret))
	forms = append(forms, url.QueryEscape(secret), url.PathEscape(secret))
	if j, err := json.Marshal(secret); err == nil {
		forms = append(forms, string(j[1:len(j)-1]))
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

// reverse reverses s byte by byte (what `rev` prints for an ASCII secret).
func reverse(s string) string {
	b := []byte(s)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
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

// Masker masks the secrets it was built with. It is immutable once built, so one Masker serves a node's stdout
// and stderr writers and its strings at once.
//
// It matches on what a reader of the bytes would decode, not on the bytes alone: JSON string escapes (\uXXXX of
// any character, surrogate pairs, \", \\, \/, \b, \f, \t, and \\uXXXX, an escape escaped once more), URL
// percent-escapes (%XX in either case, and %25XX, escaped twice), and line breaks (CR, LF, \n, \r), which are
// skipped inside a match so that a secret wrapped at any column (GNU base64's 76, xxd's 60) or split across two
// lines is still found. Each form of Forms is decoded the same way before it is matched. A masked span is
// replaced by Mask followed by the raw line breaks it held, so that the stream keeps its lines.
type Masker struct {
	nodes []trieNode // nodes[0] is the root
	edges []trieEdge // every node's children, as lists threaded through next
	root  [256]int32 // the root's children by byte, 0 for none
	// walk marks the pairs of bytes (b0, b1) at which a match may begin: the first two bytes of a pattern, a
	// pattern's first byte followed by an escape or a break, and an escape introducer followed by anything.
	// Plain text is skipped with one lookup a byte.
	walk   [256][4]uint64
	maxRaw int // the longest raw span a match may take
}

type trieNode struct {
	edge int32 // the first child's edge, or -1
	term bool  // a pattern, or a long enough run of a secret, ends here
}

type trieEdge struct {
	b    byte
	to   int32
	next int32 // the next sibling's edge, or -1
}

// New returns a Masker of every non-empty secret's forms and of the runs of its bytes. With no secret it masks
// nothing and holds nothing back.
func New(secrets ...string) *Masker {
	m := &Masker{nodes: make([]trieNode, 1, 256)}
	m.nodes[0].edge = -1
	maxPat := 0
	for _, s := range secrets {
		if s == "" {
			continue
		}
		for _, f := range Forms(s) {
			p := normalise([]byte(f))
			m.insert(p, len(p))
			maxPat = max(maxPat, len(p))
		}
		// Runs of the value (decoded as the stream would be) at every offset, terminal from partialRun bytes on.
		v := normalise([]byte(s))
		run := partialRun(len(v))
		for i := 0; i+run <= len(v) && run < len(v); i++ {
			m.insert(v[i:min(len(v), i+maxPartialWindow)], run)
		}
	}
	for _, c := range []byte{'\\', '%'} {
		m.walk[c] = [4]uint64{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}
	}
	// A byte may take up to 7 raw bytes (\\uXXXX) and a line break may follow each one.
	m.maxRaw = 8*maxPat + 16
	return m
}

// insert adds pattern p, terminal at every depth from minTerm on.
func (m *Masker) insert(p []byte, minTerm int) {
	if len(p) == 0 {
		return
	}
	if len(p) == 1 {
		m.walk[p[0]] = [4]uint64{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}
	} else {
		m.walk[p[0]][p[1]>>6] |= 1 << (p[1] & 63)
	}
	for _, e := range []byte{'\\', '%', '\n', '\r'} {
		m.walk[p[0]][e>>6] |= 1 << (e & 63)
	}
	n := int32(0)
	for d, c := range p {
		next := m.step(n, c)
		if next < 0 {
			next = int32(len(m.nodes))
			m.nodes = append(m.nodes, trieNode{edge: -1})
			if n == 0 {
				m.root[c] = next
			} else {
				m.edges = append(m.edges, trieEdge{b: c, to: next, next: m.nodes[n].edge})
				m.nodes[n].edge = int32(len(m.edges) - 1)
			}
		}
		n = next
		if d+1 >= minTerm {
			m.nodes[n].term = true
		}
	}
}

func (m *Masker) step(n int32, c byte) int32 {
	if n == 0 {
		if t := m.root[c]; t != 0 {
			return t
		}
		return -1
	}
	for i := m.nodes[n].edge; i >= 0; i = m.edges[i].next {
		if m.edges[i].b == c {
			return m.edges[i].to
		}
	}
	return -1
}

// Empty reports whether m masks nothing.
func (m *Masker) Empty() bool { return m == nil || len(m.nodes) == 1 }

// unit kinds of decode.
const (
	unitByte     = iota // one or more decoded bytes
	unitBreak           // a line break, skipped inside a match
	unitNeedMore        // the bytes end inside an escape: more input decides
)

// decode reads one unit at the start of b: an escape (JSON or URL, once or twice) decoded to its UTF-8 bytes,
// a line break, or a plain byte. Without final, an escape cut by the end of b is unitNeedMore.
func decode(b []byte, final bool, out *[4]byte) (n, size, kind int) {
	switch c := b[0]; c {
	case '\n', '\r':
		return 0, 1, unitBreak
	case '\\':
		if len(b) < 2 {
			if !final {
				return 0, 0, unitNeedMore
			}
			return plain(b, out)
		}
		switch e := b[1]; e {
		case '"', '\\', '/':
			if e == '\\' {
				// \\uXXXX: a \uXXXX escape escaped once more (JSON inside a JSON string).
				if len(b) < 7 && !final && (len(b) == 2 || b[2] == 'u' && hexPrefix(b[3:])) {
					return 0, 0, unitNeedMore
				}
				if len(b) >= 7 && b[2] == 'u' {
					if r, ok := hex4(b[3:7]); ok {
						return unicode(r, 7, out)
					}
				}
			}
			out[0] = e
			return 1, 2, unitByte
		case 'b':
			out[0] = '\b'
			return 1, 2, unitByte
		case 'f':
			out[0] = '\f'
			return 1, 2, unitByte
		case 't':
			out[0] = '\t'
			return 1, 2, unitByte
		case 'n', 'r':
			return 0, 2, unitBreak
		case 'u':
			if len(b) < 6 {
				if !final && hexPrefix(b[2:]) {
					return 0, 0, unitNeedMore
				}
				return plain(b, out)
			}
			r, ok := hex4(b[2:6])
			if !ok {
				return plain(b, out)
			}
			if 0xD800 <= r && r < 0xDC00 { // a high surrogate: a pair is one character
				if len(b) < 12 && !final && pairPrefix(b[6:]) {
					return 0, 0, unitNeedMore
				}
				if len(b) >= 12 && b[6] == '\\' && b[7] == 'u' {
					if lo, ok := hex4(b[8:12]); ok && 0xDC00 <= lo && lo < 0xE000 {
						return unicode(0x10000+(r-0xD800)<<10+(lo-0xDC00), 12, out)
					}
				}
			}
			return unicode(r, 6, out)
		}
	case '%':
		if len(b) < 3 {
			if !final && hexPrefix(b[1:]) {
				return 0, 0, unitNeedMore
			}
			return plain(b, out)
		}
		v, ok := hex2(b[1:3])
		if !ok {
			return plain(b, out)
		}
		if v == '%' { // %25XX: escaped twice
			if len(b) < 5 && !final && hexPrefix(b[3:]) {
				return 0, 0, unitNeedMore
			}
			if len(b) >= 5 {
				if w, ok := hex2(b[3:5]); ok {
					if w == '\n' || w == '\r' {
						return 0, 5, unitBreak
					}
					out[0] = byte(w)
					return 1, 5, unitByte
				}
			}
		}
		if v == '\n' || v == '\r' {
			return 0, 3, unitBreak
		}
		out[0] = byte(v)
		return 1, 3, unitByte
	}
	return plain(b, out)
}

func plain(b []byte, out *[4]byte) (n, size, kind int) {
	out[0] = b[0]
	return 1, 1, unitByte
}

func unicode(r rune, size int, out *[4]byte) (n, _, kind int) {
	if r == '\n' || r == '\r' {
		return 0, size, unitBreak
	}
	if 0xD800 <= r && r < 0xE000 {
		r = utf8.RuneError // a lone surrogate decodes as encoding/json decodes it
	}
	return utf8.EncodeRune(out[:], r), size, unitByte
}

// hexPrefix reports whether b could begin a run of hex digits (it is empty or starts with one).
func hexPrefix(b []byte) bool {
	for _, c := range b {
		if _, ok := unhex(c); !ok {
			return false
		}
	}
	return true
}

// pairPrefix reports whether b could begin the \uDCxx of a surrogate pair.
func pairPrefix(b []byte) bool {
	const want = `\u`
	for i, c := range b {
		if i < 2 && c != want[i] || i >= 2 && !hexPrefix(b[i:i+1]) {
			return false
		}
	}
	return true
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

func hex2(b []byte) (rune, bool) {
	hi, ok1 := unhex(b[0])
	lo, ok2 := unhex(b[1])
	return rune(hi)<<4 | rune(lo), ok1 && ok2
}

func hex4(b []byte) (rune, bool) {
	hi, ok1 := hex2(b[0:2])
	lo, ok2 := hex2(b[2:4])
	return hi<<8 | lo, ok1 && ok2
}

// normalise decodes b as the masker decodes a stream, dropping line breaks: the pattern a form becomes.
func normalise(b []byte) []byte {
	var out []byte
	var u [4]byte
	for len(b) > 0 {
		n, size, kind := decode(b, true, &u)
		if kind == unitByte {
			out = append(out, u[:n]...)
		}
		b = b[size:]
	}
	return out
}

// match returns the raw length of the longest match starting at buf[i] (0 for none). Without final, undecided
// reports that buf ends while a match is still possible, so that more input could change the answer.
func (m *Masker) match(buf []byte, i int, final bool) (n int, undecided bool) {
	var u [4]byte
	state := int32(0)
	for j := i; ; {
		if j-i > m.maxRaw {
			return n, false
		}
		if j == len(buf) {
			return n, !final && m.nodes[state].edge >= 0
		}
		k, size, kind := decode(buf[j:], final, &u)
		switch kind {
		case unitNeedMore:
			return n, true
		case unitBreak:
			if state == 0 {
				return 0, false
			}
			j += size
			continue
		}
		for _, c := range u[:k] {
			if state = m.step(state, c); state < 0 {
				return n, false
			}
		}
		j += size
		if m.nodes[state].term {
			n = j - i
		}
	}
}

// mask appends to dst buf with every match replaced, leftmost first and longest at one position, and returns
// how many bytes of buf it consumed: without final, it stops at the first position where a match is undecided.
func (m *Masker) mask(dst, buf []byte, final bool) ([]byte, int) {
	last, i := 0, 0
	for i < len(buf) {
		if i+1 < len(buf) {
			if c, d := buf[i], buf[i+1]; m.walk[c][d>>6]&(1<<(d&63)) == 0 {
				i++
				continue
			}
		} else if m.walk[buf[i]] == [4]uint64{} {
			i++
			continue
		}
		n, undecided := m.match(buf, i, final)
		if undecided {
			break
		}
		if n == 0 {
			i++
			continue
		}
		dst = append(dst, buf[last:i]...)
		dst = append(dst, Mask...)
		for _, b := range buf[i : i+n] {
			if b == '\n' || b == '\r' {
				dst = append(dst, b)
			}
		}
		i += n
		last = i
	}
	return append(dst, buf[last:i]...), i
}

// String masks every secret in s: for the ledger's and events' strings and for messages.
func (m *Masker) String(s string) string {
	if m.Empty() {
		return s
	}
	out, _ := m.mask(nil, []byte(s), true)
	return string(out)
}

// Bytes masks every secret in b, returning b itself when nothing was masked.
func (m *Masker) Bytes(b []byte) []byte {
	if m.Empty() {
		return b
	}
	out, _ := m.mask(make([]byte, 0, len(b)), b, true)
	if string(out) == string(b) {
		return b
	}
	return out
}

// Writer masks secrets in what is written through it. It is not safe for concurrent use. Call Flush (or Close)
// after the last Write: the bytes from the first position where a secret could still begin are held back until
// then (at most the longest form's raw span), and a complete line only while its end could begin a secret
// that continues on the next line.
type Writer struct {
	m       *Masker
	w       io.Writer
	pending []byte
	out     []byte
}

// Writer returns a Writer to w masking m's secrets.
func (m *Masker) Writer(w io.Writer) *Writer { return &Writer{m: m, w: w} }

// NewWriter returns a Writer to w masking every form of every non-empty secret. With no secret it still works,
// and holds nothing back.
func NewWriter(w io.Writer, secrets []string) *Writer { return New(secrets...).Writer(w) }

// Write masks p with what was held back and writes every byte that can no longer be the start of a secret. It
// reports len(p) on success, although some bytes may be held until the next Write or Flush.
func (w *Writer) Write(p []byte) (int, error) {
	if w.m.Empty() {
		return w.w.Write(p)
	}
	buf := p
	if len(w.pending) > 0 {
		buf = append(w.pending, p...)
	}
	out, n := w.m.mask(w.out[:0], buf, false)
	w.out = out[:0]
	w.pending = append(w.pending[:0], buf[n:]...) // a move to the front when buf is pending's array
	if len(out) > 0 {
		if _, err := w.w.Write(out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Flush masks and writes what was held back.
func (w *Writer) Flush() error {
	if len(w.pending) == 0 {
		return nil
	}
	out, _ := w.m.mask(w.out[:0], w.pending, true)
	w.pending = w.pending[:0]
	_, err := w.w.Write(out)
	return err
}

// Close flushes; it does not close the underlying writer.
func (w *Writer) Close() error { return w.Flush() }

// String masks every form of the secrets in s. It builds a Masker on every call: one that masks many strings
// should build its Masker once with New.
func String(s string, secrets []string) string { return New(secrets...).String(s) }
