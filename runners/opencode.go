package runners

import "strings"

// opencode runs opencode (`opencode run`) with its raw JSON event output, against OpenRouter.
//
// Image entrypoint, after the prompt-file check and the git bootstrap:
//
//	exec opencode run "$@" <"$PROMPT_FILE"
//
// `run` is the entrypoint's fixed verb; opencode reads a non-TTY stdin fully as the message.
//
// Container args: --format json --auto --model openrouter/<model>. --auto approves every permission prompt (run
// otherwise auto-rejects them); --model takes provider/model and splits at the first "/", so the routed
// OpenRouter id (anthropic/claude-sonnet-4.5) is prefixed with the openrouter provider; without the prefix
// opencode would read "anthropic" as the provider and look for an Anthropic key that is not there. A model
// already written in opencode's own form (openrouter/anthropic/claude-sonnet-4.5) is passed as it is.
//
// Credentials: OPENROUTER_API_KEY, which enables opencode's openrouter provider.
//
// Vocabulary: every line is {"type", "timestamp", "sessionID", …}: step_start, text, reasoning, tool_use,
// step_finish (part.tokens{input, output, reasoning, cache{read, write}}, part.cost), error, and in releases
// after 1.18.33 a terminal "done". The traps:
//
//   - There is no terminal summary: the run's totals are the sum of step_finish tokens and costs (one step per
//     model call). Reasoning tokens are reported apart from output and priced as output, so they are added to it.
//   - The stream never names the model: Model is the routed model, with ModelSource "routed".
//   - A failed run can be a single "error" line with no step at all; then the agent reported no cost, and
//     CostUSD stays nil rather than a made-up 0.
//   - opencode's hidden title-generation call is never reported, so the stream under-reports spend slightly.
var opencode = &builtin{
	name:        "opencode",
	protocol:    "opencode",
	credentials: []string{"OPENROUTER_API_KEY"},
	endpoints:   []string{"openrouter.ai"},
	args: func(model string) []string {
		if !strings.HasPrefix(model, "openrouter/") {
			model = "openrouter/" + model
		}
		return []string{"--format", "json", "--auto", "--model", model}
	},
}

type opencodeMeter struct {
	tally
	session string
	sum     usage
	cost    float64
	hasCost bool
	failed  bool
	apiErr  string // the transient API error of the last error event
	done    bool
	steps   int64
}

func newOpencodeMeter(routed string) *opencodeMeter {
	return &opencodeMeter{tally: tally{routed: routed}}
}

func (m *opencodeMeter) Line(line []byte) {
	var typ, session, part, errField []byte
	ok := m.object(line, func(key, val []byte) {
		switch string(key) {
		case "type":
			typ = val
		case "sessionID":
			session = val
		case "part":
			part = val
		case "error":
			errField = val
		}
	})
	if !ok {
		return
	}
	if m.session == "" {
		setStr(&m.session, session)
	}
	switch {
	case strIs(typ, "step_finish"):
		m.stepFinish(part)
	case strIs(typ, "error"):
		m.failed = true
		m.apiErr = opencodeAPIError(errField)
	case strIs(typ, "done"):
		m.done = true
	}
}

// opencodeAPIError classifies an error event: {"name": "APIError", "data": {"message", "statusCode",
// "isRetryable", …}}. The status decides when there is one; without one (the provider could not be reached),
// the AI SDK's isRetryable does, then the message's words.
func opencodeAPIError(errField []byte) string {
	var name, message, status, retryable []byte
	members(errField, func(key, val []byte) {
		switch string(key) {
		case "name":
			name = val
		case "data":
			members(val, func(key, val []byte) {
				switch string(key) {
				case "message":
					message = val
				case "statusCode":
					status = val
				case "isRetryable":
					retryable = val
				}
			})
		}
	})
	if code := jsonStatus(status); code != 0 {
		return ClassifyAPIError(code)
	}
	if r := ClassifyAPIError(0, jsonText(message), jsonText(name)); r != "" {
		return r
	}
	if isTrue(retryable) {
		return APIUnreachable
	}
	return ""
}

func (m *opencodeMeter) stepFinish(part []byte) {
	var u usage
	var reasoning int64
	members(part, func(key, val []byte) {
		switch string(key) {
		case "tokens":
			members(val, func(key, val []byte) {
				switch string(key) {
				case "input":
					u.input, _ = count(val)
				case "output":
					u.output, _ = count(val)
				case "reasoning":
					reasoning, _ = count(val)
				case "cache":
					members(val, func(key, val []byte) {
						switch string(key) {
						case "read":
							u.cacheRead, _ = count(val)
						case "write":
							u.cacheWrite, _ = count(val)
						}
					})
				}
			})
		case "cost":
			if c, ok := money(val); ok {
				m.cost += c
				m.hasCost = true
			}
		}
	})
	u.output = addSat(u.output, reasoning)
	m.sum.add(u)
	m.steps++
}

// LiveTurns is the number of steps (model calls) finished so far.
func (m *opencodeMeter) LiveTurns() (int64, bool) { return m.steps, true }

func (m *opencodeMeter) Totals() RunTotals {
	rt := m.totals("")
	rt.SessionID = m.session
	m.sum.into(&rt)
	if m.hasCost {
		rt.CostUSD = costOf(m.cost)
	}
	rt.IsError = m.failed
	rt.APIError = m.apiErr
	rt.Finished = m.done
	return rt
}
