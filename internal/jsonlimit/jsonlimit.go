package jsonlimit

import (
	"errors"
	"fmt"
)

// DefaultMaxDepth is far deeper than any document kewplan writes (a plan nests about ten levels; a variable value
// a few more) and far shallower than what costs a decoder or a recursive walk real stack.
const DefaultMaxDepth = 500

// ErrTooDeep and ErrTooLarge are wrapped by Check's errors.
var (
	ErrTooDeep  = errors.New("JSON nested too deeply")
	ErrTooLarge = errors.New("JSON document too large")
)

// Limits bound a document; a zero field takes no limit (MaxDepth: DefaultMaxDepth).
type Limits struct {
	MaxBytes int64
	MaxDepth int
}

// Error locates a refused document: Line and Column (1-based, bytes) of the bracket that crossed the limit.
type Error struct {
	Line, Column int
	Depth        int   // the limit crossed, for ErrTooDeep
	Size         int64 // the document's size, for ErrTooLarge
	Limit        int64
	Err          error
}

func (e *Error) Error() string {
	if errors.Is(e.Err, ErrTooLarge) {
		return fmt.Sprintf("the document is %d bytes, over the limit of %d bytes", e.Size, e.Limit)
	}
	return fmt.Sprintf("line %d, column %d: arrays and objects nest more than %d levels deep", e.Line, e.Column, e.Depth)
}

func (e *Error) Unwrap() error { return e.Err }

// Check returns nil when data is within lim, or an *Error wrapping ErrTooLarge or ErrTooDeep.
func Check(data []byte, lim Limits) error {
	if lim.MaxBytes > 0 && int64(len(data)) > lim.MaxBytes {
		return &Error{Size: int64(len(data)), Limit: lim.MaxBytes, Err: ErrTooLarge}
	}
	maxDepth := lim.MaxDepth
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	depth, line, lineStart := 0, 1, 0
	inString, escaped := false, false
	for i, c := range data {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			case c == '\n': // invalid in JSON; counted so that the position stays right for the decoder's error
				line, lineStart = line+1, i+1
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			depth++
			if depth > maxDepth {
				return &Error{Line: line, Column: i - lineStart + 1, Depth: maxDepth, Err: ErrTooDeep}
			}
		case ']', '}':
			if depth > 0 {
				depth--
			}
		case '\n':
			line, lineStart = line+1, i+1
		}
	}
	return nil
}
