// Package transcript turns a coding agent's stdout, one line at a time, into normalised transcript events with
// one schema for every vocabulary kewplan reads (claude-code, opencode, pi, hermes, and a custom runner's
// declared protocol): the assistant's text, tool calls with a one-line summary of their input, tool results,
// errors, per-model-call usage, the run's result, stderr lines, and the lines that are not events.
//
// It is pure: no I/O beyond the io.Reader handed to Scan, no terminal, no environment. It never prints and
// never escapes: every string in an Event is the agent's untrusted text as it was written, and the view that
// shows it to a person escapes it. Totals in the result event come from the runners package's meter fed with
// the same lines, so a transcript and `kewplan telemetry` always agree.
//
// Memory is bounded per line: a line longer than MaxDecodeBytes is never decoded (it becomes an unparsed event
// with a short excerpt, but still reaches the meter), and Scan never holds more than runners.MaxLineBytes of one
// line.
package transcript
