package runners

import "io"

// STUB bodies: the runners work replaces them; the signatures are the contract other packages build against.

// Builtin returns the built-in runner of that name: claude-code, opencode, pi, hermes, lemonade.
func Builtin(name string) (Runner, bool) { return nil, false }

// BuiltinNames lists the built-in runners, sorted.
func BuiltinNames() []string { return nil }

// Protocols lists the stdout vocabularies a custom runner may declare.
func Protocols() []string { return []string{"claude-code", "hermes", "opencode", "pi"} }

// NewMeter starts a meter for a vocabulary; false when the protocol is unknown.
func NewMeter(protocol, routedModel string) (Meter, bool) { return nil, false }

// Feed reads r to EOF, splitting on "\n" with bounded memory: every byte is copied verbatim to log (when not
// nil), each line of at most MaxLineBytes goes to m.Line, and a longer one to m.Oversized without being held in
// memory. It returns the first read or log-write error.
func Feed(r io.Reader, m Meter, log io.Writer) error { return nil }
