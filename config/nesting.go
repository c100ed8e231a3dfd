package config

import (
	"fmt"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
)

// MaxNesting bounds how deeply HCL source may nest before it reaches the parser. hclsyntax parses by recursive
// descent with no limit of its own (hashicorp/hcl#809): about 100,000 nested brackets, unary operators, ternaries
// or blocks exhaust the 1 GB goroutine stack, a fatal error no recover() catches, and 20,000 cost a gigabyte of
// memory. Terraform-scale configurations nest a few dozen levels; 500 leaves room for generated ones.
const MaxNesting = 500

// CheckNesting returns a diagnostic at the first place where src, HCL native syntax named filename, nests more than
// MaxNesting levels, or nil. It is a cheap pre-scan, not a parser: it follows strings, heredocs, comments and
// template interpolations well enough to count what the parser will recurse on (brackets, braces, parentheses,
// interpolations, template if/for directives, unary operators and conditionals), and leaves every syntax error to
// the parser. Counting errs on the side of more: an expression that chains hundreds of operators in one
// attribute is refused too.
func CheckNesting(filename string, src []byte) *hcl.Diagnostic {
	return newNestingScanner(filename, src, false).scan()
}

// CheckTemplateNesting is CheckNesting for a template file (templatefile()): text, with ${...} and %{...}.
func CheckTemplateNesting(filename string, src []byte) *hcl.Diagnostic {
	return newNestingScanner(filename, src, true).scan()
}

type nestKind uint8

const (
	nestBracket  nestKind = iota // ( [ or { in expression or body context
	nestInterp                   // ${ or %{ ... }: expression context, closed by }
	nestQuoted                   // "...": template context, closed by "
	nestHeredoc                  // <<EOT ... EOT: template context, closed by the marker line
	nestTemplate                 // a whole template file: template context, never closed
)

type nestLevel struct {
	kind   nestKind
	open   byte   // the bracket that opened a nestBracket level
	marker string // heredoc marker
	extra  int    // operators (unary, ?) or template if/for directives counted at this level
}

type nestingScanner struct {
	filename string
	src      []byte
	stack    []nestLevel
	depth    int // len(stack) plus every level's extra, plus baseExtra
	base     int // operators counted outside any level
	i        int
	line     int
	lineAt   int // byte offset where the current line starts
}

func newNestingScanner(filename string, src []byte, template bool) *nestingScanner {
	s := &nestingScanner{filename: filename, src: src, line: 1}
	if template {
		s.stack = append(s.stack, nestLevel{kind: nestTemplate})
	}
	return s
}

func (s *nestingScanner) top() *nestLevel {
	if len(s.stack) == 0 {
		return nil
	}
	return &s.stack[len(s.stack)-1]
}

func (s *nestingScanner) push(l nestLevel) bool {
	s.stack = append(s.stack, l)
	s.depth++
	return s.depth <= MaxNesting
}

func (s *nestingScanner) pop() {
	if len(s.stack) == 0 {
		return
	}
	s.depth -= 1 + s.stack[len(s.stack)-1].extra
	s.stack = s.stack[:len(s.stack)-1]
}

// addExtra counts one more recursion at the current level: a unary operator or a conditional.
func (s *nestingScanner) addExtra() bool {
	if t := s.top(); t != nil {
		t.extra++
	} else {
		s.base++
	}
	s.depth++
	return s.depth <= MaxNesting
}

// resetExtra forgets the operators counted at the current level: a comma or the end of an attribute ends the
// expression they belonged to.
func (s *nestingScanner) resetExtra() {
	if t := s.top(); t != nil {
		s.depth -= t.extra
		t.extra = 0
	} else {
		s.depth -= s.base
		s.base = 0
	}
}

func (s *nestingScanner) newline(at int) {
	s.line++
	s.lineAt = at + 1
}

func (s *nestingScanner) scan() *hcl.Diagnostic {
	for s.i < len(s.src) {
		if !s.step() {
			return s.diagnostic()
		}
	}
	return nil
}

// step consumes the next piece of src; false when the limit was crossed at s.i.
func (s *nestingScanner) step() bool {
	if t := s.top(); t != nil && (t.kind == nestQuoted || t.kind == nestHeredoc || t.kind == nestTemplate) {
		return s.stepTemplate(t)
	}
	return s.stepExpression()
}

// stepExpression consumes one token-ish piece of expression or body text; false when the limit was crossed at
// s.i.
func (s *nestingScanner) stepExpression() bool {
	b := s.src
	c := b[s.i]
	switch {
	case c == '\n':
		s.newline(s.i)
		if t := s.top(); t == nil || t.kind == nestInterp || t.open == '{' {
			// In a body or an object, a newline ends the attribute or item.
			s.resetExtra()
		}
	case c == '#' || (c == '/' && s.i+1 < len(b) && b[s.i+1] == '/'):
		for s.i < len(b) && b[s.i] != '\n' {
			s.i++
		}
		return true
	case c == '/' && s.i+1 < len(b) && b[s.i+1] == '*':
		s.i += 2
		for s.i < len(b) && !(b[s.i] == '*' && s.i+1 < len(b) && b[s.i+1] == '/') {
			if b[s.i] == '\n' {
				s.newline(s.i)
			}
			s.i++
		}
		s.i += 2
		return true
	case c == '"':
		if !s.push(nestLevel{kind: nestQuoted}) {
			return false
		}
	case c == '<' && s.i+1 < len(b) && b[s.i+1] == '<':
		if marker, end := heredocMarker(b, s.i+2); marker != "" {
			if !s.push(nestLevel{kind: nestHeredoc, marker: marker}) {
				return false
			}
			s.i = end // at the newline ending the introducer
			return true
		}
		s.i++
	case c == '(' || c == '[' || c == '{':
		if !s.push(nestLevel{kind: nestBracket, open: c}) {
			return false
		}
	case c == ')' || c == ']' || c == '}':
		s.pop()
	case c == ',':
		s.resetExtra()
	case c == '?':
		if !s.addExtra() {
			return false
		}
	case c == '!' && !(s.i+1 < len(b) && b[s.i+1] == '='):
		if !s.addExtra() {
			return false
		}
	case c == '-':
		if !s.addExtra() {
			return false
		}
	case isIdentStart(c):
		// Identifiers may hold dashes (claude-code): skip the whole name so that its dashes are not operators.
		for s.i < len(b) && isIdentByte(b[s.i]) {
			s.i++
		}
		return true
	case '0' <= c && c <= '9':
		s.skipNumber()
		return true
	}
	s.i++
	return true
}

// stepTemplate consumes template text inside a quoted string, a heredoc or a template file.
func (s *nestingScanner) stepTemplate(t *nestLevel) bool {
	b := s.src
	c := b[s.i]
	switch {
	case t.kind == nestHeredoc && s.i == s.lineAt && heredocEnds(b, s.i, t.marker):
		s.pop()
		return true
	case c == '\n':
		s.newline(s.i)
		if t.kind == nestQuoted {
			s.pop() // an unterminated string: the parser reports it; resynchronise on the next line
		}
	case c == '\\' && t.kind == nestQuoted:
		s.i++
		if s.i < len(b) && b[s.i] == '\n' {
			s.newline(s.i)
		}
	case c == '"' && t.kind == nestQuoted:
		s.pop()
	case (c == '$' || c == '%') && s.i+2 < len(b) && b[s.i+1] == c && b[s.i+2] == '{':
		s.i += 2 // $${ and %%{ are literal text
	case (c == '$' || c == '%') && s.i+1 < len(b) && b[s.i+1] == '{':
		if c == '%' {
			switch directiveKeyword(b, s.i+2) {
			case "if", "for":
				t.extra++
				s.depth++
			case "endif", "endfor":
				if t.extra > 0 {
					t.extra--
					s.depth--
				}
			}
		}
		if !s.push(nestLevel{kind: nestInterp}) {
			return false
		}
		s.i += 2
		return true
	}
	s.i++
	return true
}

func (s *nestingScanner) diagnostic() *hcl.Diagnostic {
	col := utf8.RuneCount(s.src[s.lineAt:s.i]) + 1
	start := hcl.Pos{Line: s.line, Column: col, Byte: s.i}
	end := hcl.Pos{Line: s.line, Column: col + 1, Byte: s.i + 1}
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Nesting too deep",
		Detail: fmt.Sprintf("The source nests more than %d levels deep here (brackets, braces, parentheses, blocks, "+
			"string templates, unary operators and conditionals all count). kewplan refuses it before parsing: "+
			"deeper nesting exhausts the parser's stack, and no hand-written configuration needs it. Flatten the "+
			"expression, for example by moving parts of it into locals.", MaxNesting),
		Subject: &hcl.Range{Filename: s.filename, Start: start, End: end},
	}
}

// heredocMarker reads the rest of a heredoc introducer after "<<": an optional "-", an identifier, then a newline.
// It returns the identifier and the offset of the newline, or "" when this is no heredoc.
func heredocMarker(b []byte, i int) (string, int) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	start := i
	for i < len(b) && isIdentByte(b[i]) {
		i++
	}
	if i == start {
		return "", 0
	}
	marker := string(b[start:i])
	if i < len(b) && b[i] == '\r' {
		i++
	}
	if i >= len(b) || b[i] != '\n' {
		return "", 0
	}
	return marker, i
}

// heredocEnds reports whether the line starting at i is the heredoc's closing marker (indentation allowed).
func heredocEnds(b []byte, i int, marker string) bool {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t') {
		i++
	}
	if len(b)-i < len(marker) || string(b[i:i+len(marker)]) != marker {
		return false
	}
	i += len(marker)
	return i == len(b) || b[i] == '\n' || b[i] == '\r'
}

// directiveKeyword returns the keyword opening a template directive body at i (after "%{"), skipping "~" and
// spaces.
func directiveKeyword(b []byte, i int) string {
	if i < len(b) && b[i] == '~' {
		i++
	}
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	start := i
	for i < len(b) && isIdentByte(b[i]) {
		i++
	}
	return string(b[start:i])
}

// skipNumber skips a number literal, whose exponent may hold a sign (1e-5).
func (s *nestingScanner) skipNumber() {
	b := s.src
	for s.i < len(b) {
		c := b[s.i]
		switch {
		case '0' <= c && c <= '9', c == '.':
		case c == 'e' || c == 'E':
			if s.i+1 < len(b) && (b[s.i+1] == '-' || b[s.i+1] == '+') {
				s.i++
			}
		default:
			return
		}
		s.i++
	}
}

func isIdentStart(c byte) bool {
	return c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || c >= 0x80
}

func isIdentByte(c byte) bool {
	return c == '_' || c == '-' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') || c >= 0x80
}

// TopLevelItem returns the bytes [start, end) of the top-level item of src (a block or an attribute, from its
// first name to the newline that ends it) that holds byte offset, as the nesting scanner reads the file: ok is
// false when offset lies outside every item, when src nests too deeply, or when an item does not begin a line. It
// lets a caller parse one block instead of a whole file (jsonplan's "in node …" context of a snippet); a caller
// that needs the parser's own answer checks what it parses and falls back to the whole file.
func TopLevelItem(src []byte, offset int) (start, end int, ok bool) {
	if offset < 0 || offset > len(src) {
		return 0, 0, false
	}
	s := newNestingScanner("", src, false)
	start, fresh := -1, true // fresh: nothing but blanks since the last newline at the top level
	for s.i < len(src) {
		if len(s.stack) == 0 {
			switch c := src[s.i]; {
			case c == '\n':
				if start >= 0 && offset < s.i {
					end := s.i
					if src[end-1] == '\r' {
						end-- // the item ends before the CR of a CRLF
					}
					return start, end, true
				}
				start, fresh = -1, true
			case c == ' ' || c == '\t':
			case fresh && isIdentStart(c):
				if s.i > offset {
					return 0, 0, false
				}
				start, fresh = s.i, false
			default:
				fresh = false
			}
		}
		if !s.step() {
			return 0, 0, false
		}
	}
	if start >= 0 && offset >= start {
		return start, len(src), true
	}
	return 0, 0, false
}
