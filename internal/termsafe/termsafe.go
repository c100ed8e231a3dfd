package termsafe

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// String escapes s for a one-line field (a model name, an argv word, a runner name): newlines and tabs too.
func String(s string) string { return escape(s, false, false) }

// Text escapes s for multi-line text (a source snippet, a detail, agent output): newlines and tabs are kept.
func Text(s string) string { return escape(s, true, false) }

// NeedsEscape reports whether String would change s.
func NeedsEscape(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if isControlByte(c) {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || isUnsafeRune(r) {
			return true
		}
		i += size
	}
	return false
}

// ANSICQuote quotes s as a bash/zsh $'...' word: every escape of String, plus \\ and \'. The result is both safe
// to show and, pasted into bash, the exact original bytes.
func ANSICQuote(s string) string { return "$'" + escape(s, false, true) + "'" }

func isControlByte(c byte) bool { return c < 0x20 || c == 0x7f }

// isUnsafeRune reports C1 controls, the line and paragraph separators and the bidirectional formatting
// characters: the one list every function of this package escapes (or, Flatten, drops).
func isUnsafeRune(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f:
		return true
	case r == 0x2028, r == 0x2029: // a terminal or an editor may break the line there
		return true
	case r >= 0x202a && r <= 0x202e:
		return true
	case r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

func escape(s string, keepLayout, quote bool) string {
	if !quote && !NeedsEscape(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			switch {
			case keepLayout && (c == '\n' || c == '\t'):
				b.WriteByte(c)
			case c == '\n':
				b.WriteString(`\n`)
			case c == '\t':
				b.WriteString(`\t`)
			case c == '\r':
				b.WriteString(`\r`)
			case isControlByte(c):
				fmt.Fprintf(&b, `\x%02x`, c)
			case quote && (c == '\\' || c == '\''):
				b.WriteByte('\\')
				b.WriteByte(c)
			default:
				b.WriteByte(c)
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, c)
		case isUnsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// Flatten makes s safe inside one line of a live display or an event: the characters String escapes are dropped
// instead (so no escape sequence survives and nothing is added to the line's width), newlines, tabs and carriage
// returns become spaces, and each byte of invalid UTF-8 becomes U+FFFD.
func Flatten(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f || c >= 0x80 {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		s = s[size:]
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteRune(utf8.RuneError)
		case r == '\n' || r == '\t' || r == '\r':
			b.WriteByte(' ')
		case r < utf8.RuneSelf && isControlByte(byte(r)), isUnsafeRune(r):
			// dropped
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
