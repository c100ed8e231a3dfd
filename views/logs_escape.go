package views

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// EscapeTerminal makes a string from an agent's stream safe to write to a terminal: C0 and C1 control
// characters, DEL, invalid UTF-8 bytes, the line and paragraph separators and the Unicode bidirectional
// embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069) are written visibly as Go-style escapes
// (`\x1b`, `\u202e`), so that a transcript shows what the agent sent rather than letting it move the cursor,
// retitle the window or reorder the text. With multiline, "\n" and "\t" are kept (text blocks, tool output).
//
// It is the transcript's own helper; a shared one (internal/termsafe) is being written and the two are meant
// to be unified.
func EscapeTerminal(s string, multiline bool) string {
	if terminalSafe(s, multiline) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\x`)
			b.WriteString(hex2(s[i]))
		case multiline && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			b.WriteString(`\x`)
			b.WriteString(hex2(byte(r)))
		case r >= 0x80 && r <= 0x9f, r == '\u2028', r == '\u2029', r >= '\u202a' && r <= '\u202e',
			r >= '\u2066' && r <= '\u2069':
			b.WriteString(`\u`)
			h := strconv.FormatInt(int64(r), 16)
			b.WriteString(strings.Repeat("0", 4-len(h)) + h)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// terminalSafe is EscapeTerminal's fast path: plain printable ASCII (and, with multiline, newlines and tabs),
// or valid UTF-8 without any of the runes it escapes.
func terminalSafe(s string, multiline bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c < 0x7f {
			continue
		}
		if multiline && (c == '\n' || c == '\t') {
			continue
		}
		if c < 0x80 {
			return false
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r <= 0x9f || r == '\u2028' || r == '\u2029' ||
			r >= '\u202a' && r <= '\u202e' || r >= '\u2066' && r <= '\u2069' {
			return false
		}
		i += size - 1
	}
	return true
}

func hex2(c byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[c>>4], digits[c&0xf]})
}
