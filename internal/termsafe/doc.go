// Package termsafe makes untrusted text safe to show on a terminal or in markdown: a configuration under review,
// a plan file from a pull request and an agent's output can all carry bytes that a terminal obeys (ESC sequences
// that clear the screen, rewrite the window title or hide a line) or that reorder what a reader sees (Unicode
// bidirectional overrides, the "Trojan Source" class, CVE-2021-42574).
//
// It is kewplan's one terminal escaper, with one list of such characters. Each is replaced by a visible escape:
// C0 controls, DEL and C1 controls as \x1b or \u0085 (newline, tab and carriage return as \n, \t and \r), the
// line and paragraph separators (U+2028, U+2029) and the bidirectional marks, embeddings, overrides and isolates
// (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069) as \u202e, and each byte of invalid UTF-8 as \xff.
// Newline and tab are kept by Text and escaped by String; ANSICQuote also quotes for bash; Flatten drops what
// the others escape, for one line of a live display or an apply event. Everything else, backslashes included, is
// left as it is. The functions are pure; plan JSON and SARIF output must not use them (they stay exact).
package termsafe
