package runners

// pi runs pi (`pi`, npm @earendil-works/pi-coding-agent) in JSON mode, against OpenRouter.
//
// Image entrypoint, after the prompt-file check and the git bootstrap:
//
//	exec pi "$@" <"$PROMPT_FILE"
//
// pi has no verb: a non-TTY stdin is read fully and becomes the first message.
//
// Container args: --mode json --no-session --provider openrouter --model <model>. --mode json runs once and
// exits; --no-session keeps pi from writing a session file into the throwaway HOME. pi has no permission prompt
// to bypass (tools run unprompted), and JSON mode skips the repository's project-level settings and extensions
// unless told to trust them, which is what a contained run wants.
//
// Credentials: OPENROUTER_API_KEY, read by pi's openrouter provider.
//
// Vocabulary: a first {"type":"session","id":…} header (the only line with the session id), then agent_start,
// turn_start, message_start, message_update, message_end, turn_end, agent_end, tool_execution_*,
// auto_retry_*, compaction_*, and finally agent_settled. The traps:
//
//   - The same usage repeats in message_update, message_end, turn_end.message and agent_end.messages[]: only
//     message_end of an assistant message is summed (and a toolResult message's own usage, when it has one).
//   - The run ends at agent_settled, not agent_end: agent_end repeats once per retry attempt.
//   - A failed run exits 0: failure comes from the last assistant stopReason (error, aborted or length) or an
//     aborted agent_settled.
//   - usage.input excludes cache reads and writes; cost.total is pi's own per-call estimate, summed.
var pi = &builtin{
	name:        "pi",
	protocol:    "pi",
	credentials: []string{"OPENROUTER_API_KEY"},
	endpoints:   []string{"openrouter.ai"},
	args: func(model string) []string {
		return []string{"--mode", "json", "--no-session", "--provider", "openrouter", "--model", model}
	},
}

type piMeter struct {
	tally
	session string
	model   string
	sum     usage
	cost    float64
	hasCost bool
	turns   int64
	failed  bool // the last assistant message_end stopped with error, aborted or length
	aborted bool
	settled bool
	apiErr  string // the transient API error of the last assistant message, when it stopped with error
}

func newPiMeter(routed string) *piMeter { return &piMeter{tally: tally{routed: routed}} }

func (m *piMeter) Line(line []byte) {
	var typ, id, message, aborted []byte
	ok := m.object(line, func(key, val []byte) {
		switch string(key) {
		case "type":
			typ = val
		case "id":
			id = val
		case "message":
			message = val
		case "aborted":
			aborted = val
		}
	})
	if !ok {
		return
	}
	switch {
	case strIs(typ, "message_end"):
		m.messageEnd(message)
	case strIs(typ, "turn_end"):
		m.turns++
	case strIs(typ, "session"):
		setStr(&m.session, id)
	case strIs(typ, "agent_settled"):
		m.settled = true
		m.aborted = isTrue(aborted)
	}
}

func (m *piMeter) messageEnd(message []byte) {
	var role, model, stop, use, errMsg []byte
	members(message, func(key, val []byte) {
		switch string(key) {
		case "role":
			role = val
		case "model":
			model = val
		case "stopReason":
			stop = val
		case "usage":
			use = val
		case "errorMessage":
			errMsg = val
		}
	})
	switch {
	case strIs(role, "assistant"):
		setStr(&m.model, model)
		m.failed = strIs(stop, "error") || strIs(stop, "aborted") || strIs(stop, "length")
		m.apiErr = ""
		if strIs(stop, "error") {
			// pi writes the provider's failure as "<status>: <body>" or the SDK's own words
			// ("Connection error.", "429 status code (no body)").
			m.apiErr = ClassifyAPIError(0, jsonText(errMsg))
		}
	case strIs(role, "toolResult"):
		// Nested model work done inside a tool is reported on its result message, and nowhere else.
	default:
		return
	}
	if use == nil {
		return
	}
	var u usage
	members(use, func(key, val []byte) {
		switch string(key) {
		case "input":
			u.input, _ = count(val)
		case "output":
			u.output, _ = count(val)
		case "cacheRead":
			u.cacheRead, _ = count(val)
		case "cacheWrite":
			u.cacheWrite, _ = count(val)
		case "cost":
			members(val, func(key, val []byte) {
				if string(key) == "total" {
					if c, ok := money(val); ok {
						m.cost += c
						m.hasCost = true
					}
				}
			})
		}
	})
	m.sum.add(u)
}

// LiveTurns is the number of turns (turn_end events) so far.
func (m *piMeter) LiveTurns() (int64, bool) { return m.turns, true }

func (m *piMeter) Totals() RunTotals {
	rt := m.totals(m.model)
	rt.SessionID = m.session
	m.sum.into(&rt)
	if m.hasCost {
		rt.CostUSD = costOf(m.cost)
	}
	if m.turns > 0 {
		rt.Turns = int64Ptr(m.turns)
	}
	rt.IsError = m.failed || m.aborted
	if m.failed && !m.aborted {
		rt.APIError = m.apiErr
	}
	rt.Finished = m.settled
	return rt
}
