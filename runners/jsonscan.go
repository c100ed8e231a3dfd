package runners

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"
)

// A small validating JSON scanner, so that meters read only the few fields they need without decoding whole
// lines into maps. A coding agent's stdout is dominated by text it does not meter (a 3 KB init line, tool
// output, system prompts); skipping over it byte by byte is several times faster than encoding/json and
// allocates nothing. Every line is still fully validated: a line that encoding/json would reject is never
// counted as an event.

// maxDepth bounds nesting, as encoding/json does, so a hostile "[[[[…" line costs no stack.
const maxDepth = 10000

// strSpecial marks the bytes that end the fast path inside a string: the closing quote, an escape, and the
// control characters JSON forbids unescaped.
var strSpecial = func() (t [256]bool) {
	for c := 0; c < 0x20; c++ {
		t[c] = true
	}
	t['"'] = true
	t['\\'] = true
	return t
}()

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString validates the string starting at b[i] == '"' and returns the index just past its closing quote,
// or -1.
func skipString(b []byte, i int) int {
	i++
	for {
		// Eight bytes at a time while none of them is special; most of a stream is long plain strings.
		for i+8 <= len(b) && !hasSpecial8(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		for i < len(b) && !strSpecial[b[i]] {
			i++
		}
		if i >= len(b) {
			return -1
		}
		switch b[i] {
		case '"':
			return i + 1
		case '\\':
			if i+1 >= len(b) {
				return -1
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) {
					return -1
				}
				for _, h := range b[i+2 : i+6] {
					if !isHex(h) {
						return -1
					}
				}
				i += 6
			default:
				return -1
			}
		default: // an unescaped control character
			return -1
		}
	}
}

// hasSpecial8 reports whether any of the eight bytes packed in x is '"', '\\' or a control character (< 0x20),
// with the usual SWAR tests: a byte is zero after XOR with the target, or below 0x20 when subtracting borrows
// into its high bit.
func hasSpecial8(x uint64) bool {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	quote := x ^ (ones * '"')
	slash := x ^ (ones * '\\')
	return ((quote-ones)&^quote|(slash-ones)&^slash|(x-ones*0x20)&^x)&highs != 0
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// skipNumber validates the number starting at b[i] and returns the index just past it, or -1.
func skipNumber(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i >= len(b) {
		return -1
	}
	switch {
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return -1
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return -1
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	return i
}

func skipLiteral(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// containerStack remembers, one bit per open container, whether it is an object (1) or an array (0). The
// first 256 levels live inline, so the common case costs a few words of stack; deeper nesting spills to the
// heap, up to maxDepth.
type containerStack struct {
	small [4]uint64
	big   []uint64
	depth int
}

func (s *containerStack) push(obj bool) bool {
	d := s.depth
	if d == maxDepth {
		return false
	}
	words := s.small[:]
	if d >= len(s.small)*64 {
		if s.big == nil {
			s.big = make([]uint64, maxDepth/64+1)
			copy(s.big, s.small[:])
		}
		words = s.big
	} else if s.big != nil {
		words = s.big
	}
	if obj {
		words[d/64] |= 1 << (d % 64)
	} else {
		words[d/64] &^= 1 << (d % 64)
	}
	s.depth++
	return true
}

func (s *containerStack) inObject() bool {
	d := s.depth - 1
	if s.big != nil {
		return s.big[d/64]&(1<<(d%64)) != 0
	}
	return s.small[d/64]&(1<<(d%64)) != 0
}

// skipValue validates the JSON value starting at b[i] (after optional whitespace) and returns the index just
// past it, or -1. It is iterative: nesting costs one bit per level, not a stack frame.
func skipValue(b []byte, i int) int {
	var st containerStack

value:
	i = skipWS(b, i)
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '{':
		if !st.push(true) {
			return -1
		}
		i = skipWS(b, i+1)
		if i < len(b) && b[i] == '}' {
			i++
			st.depth--
			goto after
		}
		goto key
	case '[':
		if !st.push(false) {
			return -1
		}
		i = skipWS(b, i+1)
		if i < len(b) && b[i] == ']' {
			i++
			st.depth--
			goto after
		}
		goto value
	case '"':
		i = skipString(b, i)
	case 't':
		i = skipLiteral(b, i, "true")
	case 'f':
		i = skipLiteral(b, i, "false")
	case 'n':
		i = skipLiteral(b, i, "null")
	default:
		i = skipNumber(b, i)
	}
	if i < 0 {
		return -1
	}

after:
	if st.depth == 0 {
		return i
	}
	i = skipWS(b, i)
	if i >= len(b) {
		return -1
	}
	if st.inObject() {
		switch b[i] {
		case ',':
			i++
			goto key
		case '}':
			i++
			st.depth--
			goto after
		}
		return -1
	}
	switch b[i] {
	case ',':
		i++
		goto value
	case ']':
		i++
		st.depth--
		goto after
	}
	return -1

key:
	i = skipWS(b, i)
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	i = skipString(b, i)
	if i < 0 {
		return -1
	}
	i = skipWS(b, i)
	if i >= len(b) || b[i] != ':' {
		return -1
	}
	i++
	goto value
}

// eachMember validates that b is exactly one JSON object (surrounding whitespace allowed) and calls fn with
// each member's key (unquoted; escapes resolved) and raw value, in order. fn may be called before a later
// syntax error is found, so callers that apply side effects collect values first and act only when eachMember
// returns true. It returns false when b is not a well-formed object.
func eachMember(b []byte, fn func(key, val []byte)) bool {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return skipWS(b, i+1) == len(b)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return false
		}
		ks := i
		i = skipString(b, i)
		if i < 0 {
			return false
		}
		key := b[ks+1 : i-1]
		if hasBackslash(key) {
			key = []byte(unquote(b[ks:i]))
		}
		i = skipWS(b, i)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skipWS(b, i+1)
		vs := i
		i = skipValue(b, i)
		if i < 0 {
			return false
		}
		fn(key, b[vs:i])
		i = skipWS(b, i)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case '}':
			return skipWS(b, i+1) == len(b)
		case ',':
			i = skipWS(b, i+1)
		default:
			return false
		}
	}
}

// members walks an already validated object value; a non-object value (null, a string, …) has no members.
func members(val []byte, fn func(key, val []byte)) {
	if len(val) == 0 || val[0] != '{' {
		return
	}
	eachMember(val, fn)
}

// elements walks an already validated array value.
func elements(val []byte, fn func(elem []byte)) {
	if len(val) == 0 || val[0] != '[' {
		return
	}
	i := skipWS(val, 1)
	if i < len(val) && val[i] == ']' {
		return
	}
	for i < len(val) {
		vs := i
		i = skipValue(val, i)
		if i < 0 {
			return
		}
		fn(val[vs:i])
		i = skipWS(val, i)
		if i >= len(val) || val[i] != ',' {
			return
		}
		i = skipWS(val, i+1)
	}
}

func hasBackslash(b []byte) bool {
	for _, c := range b {
		if c == '\\' {
			return true
		}
	}
	return false
}

// unquote decodes a validated JSON string token; escapes are rare in the fields meters read, so this slow path
// may allocate.
func unquote(tok []byte) string {
	var s string
	if json.Unmarshal(tok, &s) != nil {
		return ""
	}
	return s
}

// isString reports whether val is a JSON string token.
func isString(val []byte) bool { return len(val) >= 2 && val[0] == '"' }

// strIs reports whether val is the JSON string lit, without allocating in the common unescaped case.
func strIs(val []byte, lit string) bool {
	if !isString(val) {
		return false
	}
	inner := val[1 : len(val)-1]
	if !hasBackslash(inner) {
		return string(inner) == lit
	}
	return unquote(val) == lit
}

// maxFieldBytes caps the strings a meter keeps (model, session id): they come from an untrusted stream and are
// shown to people and stored in the ledger.
const maxFieldBytes = 512

// setStr stores the JSON string val into *dst when it is a non-empty string and differs from *dst, allocating
// only on change. It reports whether val was a non-empty string.
func setStr(dst *string, val []byte) bool {
	if !isString(val) || len(val) == 2 {
		return false
	}
	inner := val[1 : len(val)-1]
	if !hasBackslash(inner) {
		if len(inner) > maxFieldBytes {
			inner = truncUTF8(inner, maxFieldBytes)
		}
		if string(inner) != *dst {
			*dst = string(inner)
		}
		return true
	}
	s := unquote(val)
	if s == "" {
		return false
	}
	if len(s) > maxFieldBytes {
		s = string(truncUTF8([]byte(s), maxFieldBytes))
	}
	*dst = s
	return true
}

func truncUTF8(b []byte, n int) []byte {
	b = b[:n]
	for i := 0; i < utf8.UTFMax-1 && len(b) > 0; i++ {
		if r, size := utf8.DecodeLastRune(b); r != utf8.RuneError || size > 1 {
			break
		}
		b = b[:len(b)-1]
	}
	return b
}

// count parses a token count: a non-negative integer (an integral float such as 1.2e3 is accepted). ok is
// false for anything else (a string, a negative or fractional number, null), which meters treat as absent.
func count(val []byte) (n int64, ok bool) {
	if len(val) == 0 || !(isDigit(val[0])) {
		return 0, false
	}
	for _, c := range val {
		if !isDigit(c) {
			f, err := strconv.ParseFloat(string(val), 64)
			if err != nil || f < 0 || f != math.Trunc(f) || f > math.MaxInt64/2 {
				return 0, false
			}
			return int64(f), true
		}
		d := int64(c - '0')
		if n > (math.MaxInt64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// money parses a cost in USD: a finite, non-negative number. ok is false otherwise.
func money(val []byte) (f float64, ok bool) {
	if len(val) == 0 || !(isDigit(val[0]) || val[0] == '-') {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(val), 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, false
	}
	return f + 0, true // + 0 turns -0 into 0
}

// isTrue reports whether val is the literal true.
func isTrue(val []byte) bool { return string(val) == "true" }

// isNull reports whether val is absent or the literal null.
func isNull(val []byte) bool { return len(val) == 0 || string(val) == "null" }

// addSat adds without wrapping: a hostile stream can claim absurd counts but cannot make a total negative.
func addSat(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
