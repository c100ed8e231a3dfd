package runners

// hermes runs Hermes Agent (`hermes chat`, NousResearch/hermes-agent) with its stream-json output, against
// OpenRouter.
//
// Image entrypoint, after the prompt-file check and the git bootstrap:
//
//	exec hermes chat --query-file - "$@" <"$PROMPT_FILE"
//
// `chat --query-file -` is the entrypoint's fixed verb and prompt handoff: it reads the query from stdin and,
// on a non-TTY, answers once and exits. The stream-json format landed upstream in August 2026; the image must
// pin a release that has it.
//
// Container args: --format stream-json --yolo --provider openrouter --model <model>. --yolo approves dangerous
// commands, which would otherwise block a run that has nobody to ask.
//
// Credentials: OPENROUTER_API_KEY.
//
// Vocabulary: every line has "type" and "timestamp": system (subtype init: model, session_id; written before
// the agent starts, so even a failed start yields init and result), text, tool_use, tool_result, and exactly
// one terminal "result" {session_id, exit_code, tokens{input, output, total, cache_read, cache_write}, error?}.
// The traps:
//
//   - Tokens exist only in the result: before it, the live figures are all zero.
//   - There is no cost in the stream at all (only in the -z usage file, which has no event stream), so CostUSD
//     is always nil: a price table would be a guess, and kewplan does not guess a bill.
//   - Failure is a non-zero result.exit_code (equal to the process's) or an error field; an interrupted run is
//     exit_code 130. A tool_result with is_error is the agent's business, not a failed run.
var hermes = &builtin{
	name:        "hermes",
	protocol:    "hermes",
	credentials: []string{"OPENROUTER_API_KEY"},
	endpoints:   []string{"openrouter.ai"},
	args: func(model string) []string {
		return []string{"--format", "stream-json", "--yolo", "--provider", "openrouter", "--model", model}
	},
}

type hermesMeter struct {
	tally
	session  string
	model    string
	sum      usage
	failed   bool
	apiErr   string // the failed result's transient API error
	finished bool
}

func newHermesMeter(routed string) *hermesMeter { return &hermesMeter{tally: tally{routed: routed}} }

func (m *hermesMeter) Line(line []byte) {
	var typ, subtype, model, session, exit, tokens, errField []byte
	ok := m.object(line, func(key, val []byte) {
		switch string(key) {
		case "type":
			typ = val
		case "subtype":
			subtype = val
		case "model":
			model = val
		case "session_id":
			session = val
		case "exit_code":
			exit = val
		case "tokens":
			tokens = val
		case "error":
			errField = val
		}
	})
	if !ok {
		return
	}
	switch {
	case strIs(typ, "system"):
		if strIs(subtype, "init") {
			setStr(&m.model, model)
			setStr(&m.session, session)
		}
	case strIs(typ, "result"):
		m.finished = true
		setStr(&m.session, session)
		var u usage
		members(tokens, func(key, val []byte) {
			switch string(key) {
			case "input":
				u.input, _ = count(val)
			case "output":
				u.output, _ = count(val)
			case "cache_read":
				u.cacheRead, _ = count(val)
			case "cache_write":
				u.cacheWrite, _ = count(val)
			}
		})
		m.sum = u // the result carries the run's totals
		m.failed = !isNull(exit) && string(exit) != "0" || !isNull(errField) && !strIs(errField, "")
		m.apiErr = ""
		if m.failed && string(exit) != "130" {
			// Hermes reports no status field; its error text carries the provider's failure. 130 is an interrupt.
			m.apiErr = ClassifyAPIError(0, jsonText(errField))
		}
	}
}

func (m *hermesMeter) Totals() RunTotals {
	rt := m.totals(m.model)
	rt.SessionID = m.session
	m.sum.into(&rt)
	rt.IsError = m.failed
	rt.APIError = m.apiErr
	rt.Finished = m.finished
	return rt
}
