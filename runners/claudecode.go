package runners

// claudeCode runs Claude Code (`claude`) in print mode with its stream-json output.
//
// Image entrypoint, after the prompt-file check and the git bootstrap:
//
//	exec claude --print "$@" <"$PROMPT_FILE"
//
// Container args: --dangerously-skip-permissions --verbose --output-format stream-json --model <model>. The
// permission bypass is refused by the CLI for uid 0, so the image runs as a non-root user (the contract's uid
// 1001). --verbose is mandatory with stream-json in print mode; without it the CLI exits 1 before any output.
//
// Endpoint: api.anthropic.com:443, the Messages API (a runner block's endpoints replace it for ANTHROPIC_BASE_URL users).
//
// Credentials: ANTHROPIC_API_KEY and CLAUDE_CODE_OAUTH_TOKEN, forwarded by name; set only one of them.
//
// Vocabulary: one JSON object per line; "type" is "system" (subtype "init": model, session_id), "assistant",
// "user", "result", and newer kinds that are tolerated ("stream_event", "rate_limit_event", …). Every line
// carries session_id. The traps:
//
//   - The terminal "result" event is authoritative: its usage, total_cost_usd and num_turns are the whole run
//     (subagents included), and they overwrite whatever was accumulated before it.
//   - One API response arrives as several "assistant" lines, one per content block, with the same message.id and
//     identical usage; summing lines double-counts input and cache tokens. Live figures dedupe by message.id.
//   - Their usage.output_tokens is the stream's placeholder (1), so before the result the live output count is a
//     lower bound, and the cost is unknown (nil): Claude Code reports cost only in the result.
//   - Failure is result.is_error, not subtype: an API error arrives as subtype "success" with is_error true, after
//     a synthetic assistant line whose model is "<synthetic>" (never recorded as the model).
var claudeCode = &builtin{
	name:        "claude-code",
	protocol:    "claude-code",
	credentials: []string{"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"},
	endpoints:   []string{"api.anthropic.com"},
	args: func(model string) []string {
		return []string{"--dangerously-skip-permissions", "--verbose", "--output-format", "stream-json", "--model", model}
	},
}

// claudeRecent is how many distinct message ids the live dedupe remembers. The blocks of one response are
// emitted together, so a small window is exact in practice and keeps memory flat on endless streams; parallel
// subagents interleave a handful of messages at most.
const claudeRecent = 64

type claudeMsg struct {
	id  uint64 // FNV-1a of message.id
	use usage
}

type claudeMeter struct {
	tally
	session  string
	model    string // the main thread's model: init.model, then each real assistant message.model
	live     usage  // deduplicated sum of assistant usage
	liveErr  bool   // a synthetic API-error assistant line was seen
	recent   [claudeRecent]claudeMsg
	nrecent  int
	next     int
	result   bool // a result event was seen; the fields below are its figures
	resUsage usage
	resHas   bool // the result carried a usage object
	resCost  float64
	hasCost  bool
	resTurns int64
	hasTurns bool
	resErr   bool
	liveAPI  string // the transient API error of the last synthetic error line
	resAPI   string // the result's transient API error
	// liveTurns counts distinct assistant messages: one per model response, as they arrive.
	liveTurns int64
}

func newClaudeMeter(routed string) *claudeMeter { return &claudeMeter{tally: tally{routed: routed}} }

// claudeLine holds the raw top-level values a claude-code line may carry; they are applied only once the whole
// line has been validated.
type claudeLine struct {
	typ, subtype, session, model, message, parent, errField, apiErr []byte
	isError, cost, legacyCost, usage, turns, modelUsage             []byte
	apiStatus, apiType, terminal, resultText, errorsList            []byte
}

func (m *claudeMeter) Line(line []byte) {
	var f claudeLine
	ok := m.object(line, func(key, val []byte) {
		switch string(key) {
		case "type":
			f.typ = val
		case "subtype":
			f.subtype = val
		case "session_id":
			f.session = val
		case "model":
			f.model = val
		case "message":
			f.message = val
		case "parent_tool_use_id":
			f.parent = val
		case "error":
			f.errField = val
		case "is_api_error_message":
			f.apiErr = val
		case "is_error":
			f.isError = val
		case "total_cost_usd":
			f.cost = val
		case "total_cost", "cost_usd": // names used by old releases
			f.legacyCost = val
		case "usage":
			f.usage = val
		case "num_turns":
			f.turns = val
		case "modelUsage":
			f.modelUsage = val
		case "api_error_status":
			f.apiStatus = val
		case "api_error_type":
			f.apiType = val
		case "terminal_reason":
			f.terminal = val
		case "result":
			f.resultText = val
		case "errors":
			f.errorsList = val
		}
	})
	if !ok {
		return
	}
	if m.session == "" {
		setStr(&m.session, f.session)
	}
	switch {
	case strIs(f.typ, "system"):
		if strIs(f.subtype, "init") && !strIs(f.model, "<synthetic>") {
			setStr(&m.model, f.model)
		}
	case strIs(f.typ, "assistant"):
		m.assistant(&f)
	case strIs(f.typ, "result"):
		m.resultEvent(&f)
	}
}

func (m *claudeMeter) assistant(f *claudeLine) {
	var id, model, use, content []byte
	members(f.message, func(key, val []byte) {
		switch string(key) {
		case "id":
			id = val
		case "model":
			model = val
		case "usage":
			use = val
		case "content":
			content = val
		}
	})
	if isTrue(f.apiErr) || (!isNull(f.errField) && !strIs(f.errField, "")) {
		m.liveErr = true
		// The synthetic line's error ("rate_limit", "server_error", …) and text ("API Error: 529 …") are written
		// by the CLI, not the model.
		m.liveAPI = ClassifyAPIError(0, jsonText(f.errField), firstText(content))
	} else if isNull(f.parent) && !strIs(model, "<synthetic>") {
		m.liveAPI = "" // the main thread went on after the error
	}
	if isNull(f.parent) && !strIs(model, "<synthetic>") {
		setStr(&m.model, model)
	}
	var u usage // a message without usage still is a turn; a later block of it may carry the usage
	if use != nil {
		u = claudeUsage(use)
	}
	if !isString(id) || len(id) == 2 {
		m.live.add(u) // nothing to dedupe by
		m.liveTurns++
		return
	}
	h := fnv64(id[1 : len(id)-1])
	for i := 0; i < m.nrecent; i++ {
		if m.recent[i].id == h {
			// Another block of a response already counted: replace its figures rather than add them.
			m.live.sub(m.recent[i].use)
			m.live.add(u)
			m.recent[i].use = u
			return
		}
	}
	m.live.add(u)
	m.liveTurns++
	m.recent[m.next] = claudeMsg{id: h, use: u}
	m.next = (m.next + 1) % claudeRecent
	if m.nrecent < claudeRecent {
		m.nrecent++
	}
}

func claudeUsage(val []byte) usage {
	var u usage
	members(val, func(key, val []byte) {
		switch string(key) {
		case "input_tokens":
			u.input, _ = count(val)
		case "output_tokens":
			u.output, _ = count(val)
		case "cache_read_input_tokens":
			u.cacheRead, _ = count(val)
		case "cache_creation_input_tokens":
			u.cacheWrite, _ = count(val)
		}
	})
	return u
}

func (m *claudeMeter) resultEvent(f *claudeLine) {
	m.result = true
	setStr(&m.session, f.session)
	m.resHas = len(f.usage) > 0 && f.usage[0] == '{'
	if m.resHas {
		m.resUsage = claudeUsage(f.usage)
	}
	m.resCost, m.hasCost = money(f.cost)
	if !m.hasCost {
		m.resCost, m.hasCost = money(f.legacyCost)
	}
	m.resTurns, m.hasTurns = count(f.turns)
	if f.isError != nil {
		m.resErr = isTrue(f.isError)
	} else {
		// Without is_error (never seen in 2.x), an error_* subtype is the only signal left.
		m.resErr = isString(f.subtype) && !strIs(f.subtype, "success")
	}
	if m.model == "" {
		m.model = topModel(f.modelUsage)
	}
	m.resAPI = ""
	if m.resErr {
		m.resAPI = claudeResultAPIError(f, m.liveAPI)
	}
}

// claudeResultAPIError classifies a failed result. Since 2.1 the CLI says an API error ended the run with
// terminal_reason "api_error" and gives the HTTP status in api_error_status; any other terminal reason (max turns,
// budget, abort) is not an API error whatever the text says. Older releases only wrote "API Error: 529 …" into
// the result text.
func claudeResultAPIError(f *claudeLine, live string) string {
	if isString(f.terminal) && !strIs(f.terminal, "api_error") {
		return ""
	}
	if status := jsonStatus(f.apiStatus); status != 0 {
		return ClassifyAPIError(status)
	}
	var texts []string
	if t := jsonText(f.apiType); t != "" {
		texts = append(texts, t)
	}
	if t := jsonText(f.resultText); t != "" {
		texts = append(texts, t)
	}
	elements(f.errorsList, func(e []byte) {
		if t := jsonText(e); t != "" {
			texts = append(texts, t)
		}
	})
	if r := ClassifyAPIError(0, texts...); r != "" {
		return r
	}
	return live
}

// firstText is the text of the first text block of a message's content.
func firstText(content []byte) string {
	var text string
	elements(content, func(e []byte) {
		if text != "" {
			return
		}
		members(e, func(key, val []byte) {
			if string(key) == "text" {
				text = jsonText(val)
			}
		})
	})
	return text
}

// topModel picks the model with the largest cost from result.modelUsage, ties by name, for a stream that
// named no model anywhere else.
func topModel(val []byte) string {
	var best string
	bestCost := -1.0
	members(val, func(key, v []byte) {
		c := 0.0
		members(v, func(k, x []byte) {
			if string(k) == "costUSD" {
				c, _ = money(x)
			}
		})
		if name := string(key); name != "<synthetic>" && name != "" && (c > bestCost || c == bestCost && name < best) {
			best, bestCost = name, c
		}
	})
	if len(best) > maxFieldBytes {
		best = string(truncUTF8([]byte(best), maxFieldBytes))
	}
	return best
}

func (m *claudeMeter) Totals() RunTotals {
	rt := m.totals(m.model)
	rt.SessionID = m.session
	if !m.result {
		m.live.into(&rt)
		rt.IsError = m.liveErr
		if m.liveErr {
			rt.APIError = m.liveAPI
		}
		return rt
	}
	if m.resHas {
		m.resUsage.into(&rt)
	} else {
		m.live.into(&rt)
	}
	if m.hasCost {
		rt.CostUSD = costOf(m.resCost)
	}
	if m.hasTurns {
		rt.Turns = int64Ptr(m.resTurns)
	}
	rt.IsError = m.resErr
	rt.APIError = m.resAPI
	rt.Finished = true
	return rt
}

// fnv64 is FNV-1a; the live dedupe keeps hashes, not strings, so it allocates nothing per message.
func fnv64(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// LiveTurns is the number of model responses so far: distinct assistant message ids while the run goes on, and
// the result's num_turns once it arrived, whichever is larger.
func (m *claudeMeter) LiveTurns() (int64, bool) {
	if m.hasTurns && m.resTurns > m.liveTurns {
		return m.resTurns, true
	}
	return m.liveTurns, true
}
