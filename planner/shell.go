package planner

import (
	"strings"

	"github.com/kewplan/kewplan/internal/termsafe"
)

// ShellQuote quotes s for a POSIX shell when it needs it, so an argv can be shown as a command a reviewer could
// paste: plain words stay as they are, anything else goes in single quotes. A word holding a control character,
// a bidirectional override or invalid UTF-8 is written as bash's $'...' with visible escapes instead: raw, it
// would drive the reviewer's terminal (clear the screen, retitle the window, hide a line).
func ShellQuote(s string) string {
	if s == "" {
		return "''"
	}
	if termsafe.NeedsEscape(s) {
		return termsafe.ANSICQuote(s)
	}
	plain := true
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_./:=@,+%", c)) {
			plain = false
			break
		}
	}
	if plain {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ShellJoin quotes each word and joins them with spaces.
func ShellJoin(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = ShellQuote(w)
	}
	return strings.Join(q, " ")
}
