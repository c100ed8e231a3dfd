// Package runners holds the adapters for each coding agent kewplan can contain: the credential names it needs,
// the container args for a routed model, and a meter that reads its stdout vocabulary into run totals.
//
// The built-ins are claude-code, opencode, pi, hermes and lemonade; each one's doc comment (claudecode.go,
// opencode.go, …) states its vocabulary, its telemetry traps and the entrypoint line its image must use. A
// `runner` block in configuration (a custom runner, or an override of a built-in's credentials or args) is
// resolved by the planner, which keeps where every credential name came from so that a widening can be flagged;
// its stdout is metered by NewMeter for the protocol the block declares.
//
// Meters are honest rather than merely parsing: they take the vocabulary's authoritative figures (Claude Code's
// result, the sum of opencode's steps, pi's assistant message_end events, Hermes' result), dedupe what an agent
// repeats, report a cost only when the agent did (nil, never a made-up 0), and fall back to the routed model only
// when the stream names none, saying so. They tolerate unknown event types and fields, count lines that are not
// JSON objects, and read only the fields they need with a small validating scanner, without decoding whole lines.
//
// Runners are pure: no I/O, no Docker, no environment. The executor feeds them lines through Feed; the planner
// asks them for credentials and args. They never decide anything from stdout beyond telemetry and whether the
// run ended on a transient model-API failure (RunTotals.APIError, which only earns a bounded retry): the stream
// is agent-controlled text and carries no authority (a reviewer's verdict comes from its sidecar file).
package runners
