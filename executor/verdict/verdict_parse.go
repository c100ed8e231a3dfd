package verdict

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// The verdict schema, decided here once:
//
//	{"verdict": "approve" | "request_changes" | "reject",   required
//	 "summary": string,                                      required (may be empty)
//	 "findings": [{"path": string, "line": int, "message": string}, ...]}   optional; absent means none
//
// Inside a finding all three keys are required; line is a whole number from 0 (no particular line) to 2^31-1.
//
// The decoder is a small hand parser, not encoding/json: v1 matches keys case-insensitively and lets the last of
// two duplicate keys win (golang/go#14750), so {"verdict":"reject","VERDICT":"approve"} would approve. Here every
// key must be spelled exactly once, unknown keys are refused, nothing but whitespace may follow the object, the
// input must be valid UTF-8 without a byte order mark, and \u escapes must form whole characters. Text fields may
// not hold control characters other than tab and newline, because they are printed to terminals later. The
// schema's depth is fixed, so hostile nesting is refused at its first unexpected bracket rather than recursed into.

// SyntaxError says where and why a sidecar is unparseable.
type SyntaxError struct {
	Offset int // byte offset of the problem
	Line   int // 1-based
	Column int // 1-based, in bytes
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%d:%d: %s", e.Line, e.Column, e.Msg)
}

// decodeVerdict parses a sidecar's bytes under the strict schema. The returned Verdict's SHA256 is the digest of
// exactly these bytes, so the digest and the parsed verdict can never come from two different reads.
func decodeVerdict(data []byte) (*Verdict, error) {
	p := &verdictParser{data: data}
	v, err := p.document()
	if err != nil {
		return nil, err
	}
	v.SHA256 = verdictDigest(data)
	return v, nil
}

type verdictParser struct {
	data []byte
	pos  int
}

func (p *verdictParser) errAt(off int, format string, args ...any) error {
	line, col := 1, 1
	for _, c := range p.data[:min(off, len(p.data))] {
		if c == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return &SyntaxError{Offset: off, Line: line, Column: col, Msg: fmt.Sprintf(format, args...)}
}

func (p *verdictParser) errorf(format string, args ...any) error {
	return p.errAt(p.pos, format, args...)
}

func (p *verdictParser) document() (*Verdict, error) {
	if bytes.HasPrefix(p.data, []byte("\xef\xbb\xbf")) {
		return nil, p.errorf("the file starts with a UTF-8 byte order mark; write plain UTF-8 JSON")
	}
	if !utf8.Valid(p.data) {
		off := 0
		for off < len(p.data) {
			r, size := utf8.DecodeRune(p.data[off:])
			if r == utf8.RuneError && size <= 1 {
				break
			}
			off += size
		}
		return nil, p.errAt(off, "invalid UTF-8; the sidecar must be UTF-8 JSON")
	}
	p.skipSpace()
	if p.pos == len(p.data) {
		return nil, p.errorf("the file is empty; want a JSON object such as {\"verdict\": \"approve\", \"summary\": \"...\"}")
	}
	v, err := p.verdictObject()
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return nil, p.errorf("unexpected data after the verdict object; the sidecar must hold exactly one JSON object")
	}
	return v, nil
}

func (p *verdictParser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// object parses {"key": value, ...}, calling field for each key with the parser positioned at its value. It
// refuses a key seen twice, a key that differs from a known one only in case, and unknown keys. known lists the
// accepted keys; what names the object in messages.
func (p *verdictParser) object(what string, known []string, field func(key string) error) (map[string]bool, error) {
	if err := p.expect('{', what+" must be a JSON object"); err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(known))
	first := make(map[string]int, len(known))
	p.skipSpace()
	if p.peek() == '}' {
		p.pos++
		return seen, nil
	}
	for {
		p.skipSpace()
		keyOff := p.pos
		if p.peek() != '"' {
			return nil, p.errorf("expected a quoted key in %s", what)
		}
		key, err := p.rawString()
		if err != nil {
			return nil, err
		}
		canonical := ""
		for _, k := range known {
			if key == k {
				canonical = k
				break
			}
		}
		if canonical == "" {
			for _, k := range known {
				if strings.EqualFold(key, k) {
					return nil, p.errAt(keyOff, "key %q in %s differs only in case from %q; keys are case-sensitive", key, what, k)
				}
			}
			return nil, p.errAt(keyOff, "unknown key %q in %s; allowed keys are %s", key, what, verdictKeyList(known))
		}
		if seen[canonical] {
			prev := p.errAt(first[canonical], "").(*SyntaxError)
			return nil, p.errAt(keyOff, "duplicate key %q in %s (first at %d:%d); each key may appear once", key, what, prev.Line, prev.Column)
		}
		seen[canonical] = true
		first[canonical] = keyOff
		p.skipSpace()
		if err := p.expect(':', fmt.Sprintf("expected ':' after key %q", key)); err != nil {
			return nil, err
		}
		p.skipSpace()
		if err := field(canonical); err != nil {
			return nil, err
		}
		p.skipSpace()
		switch p.peek() {
		case ',':
			p.pos++
			p.skipSpace()
			if p.peek() == '}' {
				return nil, p.errorf("trailing comma in %s", what)
			}
		case '}':
			p.pos++
			return seen, nil
		default:
			return nil, p.errorf("expected ',' or '}' in %s", what)
		}
	}
}

func (p *verdictParser) verdictObject() (*Verdict, error) {
	v := &Verdict{Findings: []Finding{}}
	seen, err := p.object("the verdict", []string{"verdict", "summary", "findings"}, func(key string) error {
		switch key {
		case "verdict":
			off := p.pos
			s, err := p.text("verdict")
			if err != nil {
				return err
			}
			switch s {
			case Approve, RequestChanges, Reject:
				v.Verdict = s
			default:
				return p.errAt(off, "verdict %q is not one of \"approve\", \"request_changes\", \"reject\" (exact spelling)", s)
			}
		case "summary":
			s, err := p.text("summary")
			if err != nil {
				return err
			}
			v.Summary = s
		case "findings":
			fs, err := p.findings()
			if err != nil {
				return err
			}
			v.Findings = fs
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, k := range []string{"verdict", "summary"} {
		if !seen[k] {
			return nil, p.errAt(0, "the verdict object has no %q key; %q and %q are required", k, "verdict", "summary")
		}
	}
	return v, nil
}

func (p *verdictParser) findings() ([]Finding, error) {
	if err := p.expectValue('[', "findings", "an array"); err != nil {
		return nil, err
	}
	p.pos++
	out := []Finding{}
	p.skipSpace()
	if p.peek() == ']' {
		p.pos++
		return out, nil
	}
	for {
		p.skipSpace()
		i := len(out)
		what := fmt.Sprintf("findings[%d]", i)
		if err := p.expectValue('{', what, "an object"); err != nil {
			return nil, err
		}
		start := p.pos
		var f Finding
		seen, err := p.object(what, []string{"path", "line", "message"}, func(key string) error {
			var err error
			switch key {
			case "path":
				f.Path, err = p.text(what + ".path")
			case "line":
				f.Line, err = p.lineNumber(what + ".line")
			case "message":
				f.Message, err = p.text(what + ".message")
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		for _, k := range []string{"path", "line", "message"} {
			if !seen[k] {
				return nil, p.errAt(start, "%s has no %q key; a finding needs \"path\", \"line\" and \"message\"", what, k)
			}
		}
		out = append(out, f)
		p.skipSpace()
		switch p.peek() {
		case ',':
			p.pos++
			p.skipSpace()
			if p.peek() == ']' {
				return nil, p.errorf("trailing comma in findings")
			}
		case ']':
			p.pos++
			return out, nil
		default:
			return nil, p.errorf("expected ',' or ']' in findings")
		}
	}
}

func (p *verdictParser) peek() byte {
	if p.pos < len(p.data) {
		return p.data[p.pos]
	}
	return 0
}

func (p *verdictParser) expect(c byte, msg string) error {
	if p.peek() != c {
		if p.pos >= len(p.data) {
			return p.errorf("%s: the file ends early", msg)
		}
		return p.errorf("%s", msg)
	}
	p.pos++
	return nil
}

// expectValue checks that the value at the cursor starts with c, naming what was found instead.
func (p *verdictParser) expectValue(c byte, what, want string) error {
	if p.peek() == c {
		return nil
	}
	return p.errorf("%s must be %s, found %s", what, want, p.describeValue())
}

func (p *verdictParser) describeValue() string {
	switch c := p.peek(); {
	case p.pos >= len(p.data):
		return "the end of the file"
	case c == '"':
		return "a string"
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	case c == '-' || (c >= '0' && c <= '9'):
		return "a number"
	default:
		return fmt.Sprintf("unexpected character %q", rune(c))
	}
}

// text parses a string value and refuses control characters in it.
func (p *verdictParser) text(what string) (string, error) {
	if err := p.expectValue('"', what, "a string"); err != nil {
		return "", err
	}
	off := p.pos
	s, err := p.rawString()
	if err != nil {
		return "", err
	}
	for _, r := range s {
		if r == '\t' || r == '\n' {
			continue
		}
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) {
			return "", p.errAt(off, "%s contains the control character U+%04X; verdict text must be printable", what, r)
		}
	}
	return s, nil
}

// rawString parses a JSON string at the cursor (which is on the opening quote) and returns its value.
func (p *verdictParser) rawString() (string, error) {
	p.pos++ // opening quote
	var b strings.Builder
	for {
		if p.pos >= len(p.data) {
			return "", p.errorf("unterminated string: the file ends early")
		}
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			return b.String(), nil
		case c < 0x20:
			return "", p.errorf("raw control character 0x%02x inside a string; JSON needs it escaped", c)
		case c == '\\':
			r, err := p.escape()
			if err != nil {
				return "", err
			}
			b.WriteRune(r)
		default:
			// The input is valid UTF-8 (checked up front), so multi-byte runes copy through byte by byte.
			b.WriteByte(c)
			p.pos++
		}
	}
}

func (p *verdictParser) escape() (rune, error) {
	start := p.pos
	p.pos++ // backslash
	if p.pos >= len(p.data) {
		return 0, p.errorf("unterminated escape: the file ends early")
	}
	c := p.data[p.pos]
	p.pos++
	switch c {
	case '"', '\\', '/':
		return rune(c), nil
	case 'b':
		return '\b', nil
	case 'f':
		return '\f', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'u':
		r1, err := p.hex4()
		if err != nil {
			return 0, err
		}
		if !utf16.IsSurrogate(r1) {
			return r1, nil
		}
		if r1 >= 0xdc00 || p.pos+6 > len(p.data) || p.data[p.pos] != '\\' || p.data[p.pos+1] != 'u' {
			return 0, p.errAt(start, "lone UTF-16 surrogate \\u%04X; escape a whole character", r1)
		}
		p.pos += 2
		r2, err := p.hex4()
		if err != nil {
			return 0, err
		}
		r := utf16.DecodeRune(r1, r2)
		if r == utf8.RuneError {
			return 0, p.errAt(start, "invalid UTF-16 surrogate pair \\u%04X\\u%04X", r1, r2)
		}
		return r, nil
	}
	return 0, p.errAt(start, "invalid escape \\%c in a string", c)
}

func (p *verdictParser) hex4() (rune, error) {
	if p.pos+4 > len(p.data) {
		return 0, p.errorf("truncated \\u escape: the file ends early")
	}
	var r rune
	for _, c := range p.data[p.pos : p.pos+4] {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, p.errorf("invalid \\u escape: want four hexadecimal digits")
		}
		r = r<<4 | rune(d)
	}
	p.pos += 4
	return r, nil
}

// maxFindingLine bounds a line number so it fits every int.
const maxFindingLine = 1<<31 - 1

func (p *verdictParser) lineNumber(what string) (int, error) {
	c := p.peek()
	if c == '-' {
		return 0, p.errorf("%s must not be negative", what)
	}
	if c < '0' || c > '9' {
		return 0, p.errorf("%s must be a whole number, found %s", what, p.describeValue())
	}
	start := p.pos
	if c == '0' && p.pos+1 < len(p.data) && p.data[p.pos+1] >= '0' && p.data[p.pos+1] <= '9' {
		return 0, p.errorf("%s has a leading zero, which JSON does not allow", what)
	}
	n := 0
	for p.pos < len(p.data) && p.data[p.pos] >= '0' && p.data[p.pos] <= '9' {
		n = n*10 + int(p.data[p.pos]-'0')
		if n > maxFindingLine {
			return 0, p.errAt(start, "%s is larger than %d", what, maxFindingLine)
		}
		p.pos++
	}
	switch p.peek() {
	case '.', 'e', 'E':
		return 0, p.errAt(start, "%s must be a whole number without a fraction or exponent", what)
	}
	return n, nil
}

func verdictKeyList(keys []string) string {
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = fmt.Sprintf("%q", k)
	}
	return strings.Join(q, ", ")
}
