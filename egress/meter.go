package egress

import (
	"bytes"
	"encoding/json"
	"io"
)

// The broker's meter: it reads the provider's own usage from a brokered answer as the bytes pass to the agent,
// never holding the answer back and never keeping more of it than one small value. An answer is either one JSON
// document (Anthropic Messages, OpenAI-style chat completions) or server-sent events whose data lines are JSON
// documents (Anthropic's message_start and message_delta, OpenAI's chunks with a final usage chunk). Only these
// values are picked, wherever they are in the document:
//
//	usage, model                  a JSON answer, a message_delta event, an OpenAI chunk
//	message.usage, message.model  Anthropic's message_start event
//
// A usage object sets the fields it carries (Anthropic's message_delta repeats output_tokens as a running total),
// so the last figure of each field stands.

// maxPickedValue bounds one picked value (a usage object, a model name): a bigger one is dropped whole.
const maxPickedValue = 8 << 10

// maxPickedKey bounds the key names the scanner remembers; a longer key is never one it picks.
const maxPickedKey = 32

// BrokerUsage is what the provider reported for one brokered answer, or summed over a node's answers.
type BrokerUsage struct {
	// Model is the model the provider answered with ("" when it did not say).
	Model            string `json:"model,omitempty"`
	InputTokens      int64  `json:"input_tokens"`
	OutputTokens     int64  `json:"output_tokens"`
	CacheReadTokens  int64  `json:"cache_read_tokens"`
	CacheWriteTokens int64  `json:"cache_write_tokens"`
	// CostUSD is the cost: the provider's own figure (OpenRouter's usage.cost, CostSource "reported"), else tokens ×
	// the node's price ("estimated"); CostSource "unknown" (and CostUSD 0) when neither is known.
	CostUSD    float64 `json:"cost_usd"`
	CostSource string  `json:"cost_source"`
	// Reported is whether the answer carried a usage object at all.
	Reported bool `json:"reported"`
}

// Tokens is what max_tokens caps: input + output + cache writes (cache reads are cheap and not counted), as the
// agent's meter counts them.
func (u BrokerUsage) Tokens() int64 { return u.InputTokens + u.OutputTokens + u.CacheWriteTokens }

// rawUsage is a usage object of either vocabulary; a nil field was absent.
type rawUsage struct {
	// Anthropic.
	InputTokens      *int64 `json:"input_tokens"`
	OutputTokens     *int64 `json:"output_tokens"`
	CacheWriteTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadTokens  *int64 `json:"cache_read_input_tokens"`
	// OpenAI and OpenRouter: prompt_tokens includes the cached ones.
	PromptTokens        *int64   `json:"prompt_tokens"`
	CompletionTokens    *int64   `json:"completion_tokens"`
	Cost                *float64 `json:"cost"`
	PromptTokensDetails *struct {
		CachedTokens     *int64 `json:"cached_tokens"`
		CacheWriteTokens *int64 `json:"cache_write_tokens"`
	} `json:"prompt_tokens_details"`
}

// usageMeter meters one answer. It is an io.Writer fed with the answer's bytes in order, in pieces of any size.
type usageMeter struct {
	sse bool
	// SSE line state: how much of "data:" the current line has matched (-1: not a data line), and whether the
	// line's JSON is being scanned.
	prefix int
	inData bool
	scan   jsonPicker
	// line holds the start of an event line that arrived in pieces; long marks one past maxSSELine.
	line []byte
	long bool
	// skipEvent is set while the current event is one whose data never carries usage (handleLine).
	skipEvent bool

	usage BrokerUsage
	// final is set once a top-level usage object was read: a JSON answer's, Anthropic's message_delta, the
	// usage chunk of an OpenAI-style stream. A call whose meter never saw it is unsettled (reserve.go).
	final        bool
	reportedCost *float64
	promptTokens *int64 // OpenAI's figure, cached tokens still included
	cachedTokens int64
}

func newUsageMeter(sse bool) *usageMeter {
	m := &usageMeter{sse: sse}
	m.scan.pick = m.picked
	return m
}

var dataPrefix = []byte("data:")

// maxSSELine bounds the line the meter holds when an event's line arrives in pieces; a longer line is scanned as
// it passes instead (stream).
const maxSSELine = 64 << 10

func (m *usageMeter) Write(p []byte) (int, error) {
	n := len(p)
	if !m.sse {
		m.scan.feed(p)
		return n, nil
	}
	for len(p) > 0 {
		switch {
		case m.long:
			i := bytes.IndexByte(p, '\n')
			if i < 0 {
				m.stream(p)
				return n, nil
			}
			m.stream(p[:i+1])
			m.long, p = false, p[i+1:]
		case len(m.line) > 0:
			i := bytes.IndexByte(p, '\n')
			if i < 0 {
				m.partial(p)
				return n, nil
			}
			m.partial(p[:i])
			if m.long {
				m.stream(p[i : i+1])
				m.long = false
			} else {
				m.handleLine(m.line)
			}
			m.line, p = m.line[:0], p[i+1:]
		default:
			j := bytes.LastIndexByte(p, '\n')
			if j < 0 {
				m.partial(p)
				return n, nil
			}
			m.scanLines(p[:j+1]) // whole lines inside one piece, the common case: never copied
			p = p[j+1:]
		}
	}
	return n, nil
}

// scanLines reads whole event lines (body ends with a newline).
func (m *usageMeter) scanLines(body []byte) {
	for len(body) > 0 {
		i := bytes.IndexByte(body, '\n')
		line := body[:i]
		body = body[i+1:]
		// The events that never carry usage are most of a long answer, so their lines are read here without a call:
		// the name line of a content event, its data lines (on their first byte) and the blank line that ends it.
		// Anything else of such an event, and every line of the others, goes to handleLine.
		switch {
		case m.skipEvent && (i == 0 || i == 1 && line[0] == '\r'):
			m.skipEvent = false
			continue
		case m.skipEvent && line[0] == 'd':
			continue
		case i > len(contentEventLine) && line[0] == 'e' && bytes.HasPrefix(line, contentEventLine):
			m.skipEvent = true
			// The common content event is one data line and the blank line: both passed over with one search.
			if len(body) > 0 && body[0] == 'd' {
				if k := bytes.IndexByte(body, '\n'); k >= 0 {
					switch {
					case k+1 < len(body) && body[k+1] == '\n':
						body, m.skipEvent = body[k+2:], false
					case k > 0 && body[k-1] == '\r' && k+2 < len(body) && body[k+1] == '\r' && body[k+2] == '\n':
						body, m.skipEvent = body[k+3:], false
					}
				}
			}
			continue
		}
		m.handleLine(line)
	}
}

// contentEventLine starts the name line of Anthropic's content events, which never carry usage.
var contentEventLine = []byte("event: content_block_")

// partial keeps the piece of a line that has not ended yet, or streams it once the line is longer than maxSSELine.
func (m *usageMeter) partial(b []byte) {
	if m.long {
		m.stream(b)
		return
	}
	if len(m.line)+len(b) > maxSSELine {
		m.long = true
		m.prefix, m.inData = 0, false
		m.stream(m.line)
		m.stream(b)
		m.line = m.line[:0]
		return
	}
	m.line = append(m.line, b...)
}

var (
	quotedUsage = []byte(`"usage"`)
	quotedModel = []byte(`"model"`)
)

var eventPrefix = []byte("event:")

// handleLine reads one whole event line. An event's data is scanned only when it may carry usage or the model:
// Anthropic names its events, and only message_start and message_delta carry usage, so the data of its
// content_block_* and ping events (nearly every line of a long answer) is skipped by its name alone; a data line
// of an unnamed event (OpenAI's chunks) is scanned when it names usage or model.
func (m *usageMeter) handleLine(line []byte) {
	line = bytes.TrimSuffix(line, []byte("\r"))
	if len(line) == 0 {
		m.skipEvent = false // the event ended
		return
	}
	if name, ok := bytes.CutPrefix(line, eventPrefix); ok {
		name = bytes.TrimSpace(name)
		m.skipEvent = bytes.HasPrefix(name, []byte("content_block_")) || string(name) == "ping"
		return
	}
	data, ok := bytes.CutPrefix(line, dataPrefix)
	if !ok || m.skipEvent || !bytes.Contains(data, quotedUsage) && !bytes.Contains(data, quotedModel) {
		return
	}
	m.scan.reset()
	m.scan.feed(data)
	m.scan.end()
}

// stream scans a long line as it passes, byte state by byte state, keeping nothing of it.
func (m *usageMeter) stream(p []byte) {
	for len(p) > 0 {
		if m.inData {
			i := bytes.IndexByte(p, '\n')
			if i < 0 {
				m.scan.feed(p)
				return
			}
			m.scan.feed(p[:i])
			m.scan.end()
			m.inData, m.prefix = false, 0
			p = p[i+1:]
			continue
		}
		if m.prefix < 0 { // not a data line: skip to its end
			i := bytes.IndexByte(p, '\n')
			if i < 0 {
				return
			}
			m.prefix = 0
			p = p[i+1:]
			continue
		}
		c := p[0]
		p = p[1:]
		switch {
		case c == '\n':
			m.prefix = 0
		case c == dataPrefix[m.prefix]:
			m.prefix++
			if m.prefix == len(dataPrefix) {
				m.inData = true
				m.scan.reset()
			}
		default:
			m.prefix = -1
		}
	}
}

// picked receives one complete value at a picked path.
func (m *usageMeter) picked(path string, raw []byte) {
	switch path {
	case "model", "message.model":
		var s string
		if json.Unmarshal(raw, &s) == nil && s != "" && len(s) <= 200 {
			m.usage.Model = s
		}
	case "usage", "message.usage":
		var u rawUsage
		if bytes.Equal(raw, []byte("null")) || json.Unmarshal(raw, &u) != nil {
			return
		}
		m.usage.Reported = true
		if path == "usage" {
			m.final = true
		}
		set := func(dst *int64, v *int64) {
			if v != nil && *v >= 0 {
				*dst = *v
			}
		}
		set(&m.usage.InputTokens, u.InputTokens)
		set(&m.usage.OutputTokens, u.OutputTokens)
		set(&m.usage.CacheWriteTokens, u.CacheWriteTokens)
		set(&m.usage.CacheReadTokens, u.CacheReadTokens)
		set(&m.usage.OutputTokens, u.CompletionTokens)
		if u.PromptTokens != nil && *u.PromptTokens >= 0 {
			v := *u.PromptTokens
			m.promptTokens = &v
		}
		if d := u.PromptTokensDetails; d != nil {
			set(&m.cachedTokens, d.CachedTokens)
			set(&m.usage.CacheWriteTokens, d.CacheWriteTokens)
		}
		if u.Cost != nil && *u.Cost >= 0 {
			c := *u.Cost
			m.reportedCost = &c
		}
	}
}

// result is the answer's usage, its cost from the provider's figure or price (nil: no price).
func (m *usageMeter) result(price *BrokerPrice) BrokerUsage {
	u := m.usage
	if m.promptTokens != nil {
		cached := min(m.cachedTokens, *m.promptTokens)
		u.InputTokens, u.CacheReadTokens = *m.promptTokens-cached, cached
	}
	u.CostSource = CostUnknown
	switch {
	case m.reportedCost != nil:
		u.CostUSD, u.CostSource = *m.reportedCost, CostReported
	case price != nil && u.Reported:
		u.CostUSD, u.CostSource = price.cost(u), CostEstimated
	case !u.Reported:
		// No usage in the answer (an error, a refusal, a models list): nothing was billed that the meter can see.
	}
	return u
}

// Cost sources of BrokerUsage, as the agent's meter names them.
const (
	CostReported  = "reported"
	CostEstimated = "estimated"
	CostUnknown   = "unknown"
)

// jsonPicker scans one JSON document incrementally and hands the raw bytes of the values at the picked paths to
// pick. It keeps the key names of the first two levels and the value it is picking, nothing else: memory is
// bounded whatever the document. Malformed input is scanned on without a panic; whatever it picks is checked
// again by encoding/json.
type jsonPicker struct {
	pick func(path string, raw []byte)

	depth    int
	objects  uint64 // bit d-1 set: the container at depth d is an object (depths up to 64)
	expKey   bool   // in an object, a string now would be a key
	inString bool
	escape   bool
	isKey    bool
	key      []byte
	keys     [2]pickKey // the key each of the first two levels is at

	picking  bool
	overflow bool
	pickAt   int  // the depth the picked value started at
	scalar   bool // the picked value is a number or a literal
	quoted   bool // the picked value is a string
	path     string
	value    []byte
}

// pickKey is a remembered key name, kept without an allocation.
type pickKey struct {
	b [maxPickedKey]byte
	n int
}

func (k *pickKey) set(b []byte) { k.n = copy(k.b[:], b) }
func (k *pickKey) is(s string) bool {
	return k.n == len(s) && string(k.b[:k.n]) == s
}

func (j *jsonPicker) reset() {
	pick, key, value := j.pick, j.key[:0], j.value[:0]
	*j = jsonPicker{pick: pick, key: key, value: value}
}

// end ends the document: a scalar being picked at its very end (a bare number) is complete.
func (j *jsonPicker) end() {
	if j.picking && j.scalar {
		j.finish()
	}
	j.reset()
}

func (j *jsonPicker) inObject() bool {
	return j.depth > 0 && j.depth <= 64 && j.objects&(1<<(j.depth-1)) != 0
}

func (j *jsonPicker) feed(p []byte) {
	for i := 0; i < len(p); i++ {
		c := p[i]
		if j.inString {
			// Fast path: run to the next quote or backslash.
			if !j.escape && !j.isKey && !j.picking {
				k := bytes.IndexAny(p[i:], "\"\\")
				if k < 0 {
					return
				}
				i += k
				c = p[i]
			}
			if j.picking {
				j.add(c)
			}
			switch {
			case j.escape:
				j.escape = false
				if j.isKey {
					j.addKey(c)
				}
			case c == '\\':
				j.escape = true
				if j.isKey {
					j.addKey(c)
				}
			case c == '"':
				j.inString = false
				if j.isKey {
					j.isKey = false
					if j.depth >= 1 && j.depth <= 2 {
						j.keys[j.depth-1].set(j.key)
					}
				} else if j.picking && j.quoted && j.depth == j.pickAt {
					j.finish()
				}
			default:
				if j.isKey {
					j.addKey(c)
				}
			}
			continue
		}
		if j.picking && j.scalar {
			switch c {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				j.finish()
			default:
				j.add(c)
				continue
			}
		}
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case ':':
			if j.picking {
				j.add(c)
			}
			j.expKey = false
			continue
		case ',':
			if j.picking {
				j.add(c)
			}
			j.expKey = j.inObject()
			continue
		case '}', ']':
			if j.depth > 0 {
				j.depth--
			}
			if j.picking {
				j.add(c)
				if j.depth == j.pickAt {
					j.finish()
				}
			}
			j.expKey = false
			continue
		}
		// A string or the start of a value.
		if c == '"' && j.inObject() && j.expKey {
			j.inString, j.isKey, j.key = true, true, j.key[:0]
			if j.picking {
				j.add(c)
			}
			if j.depth <= 2 && j.depth >= 1 {
				j.keys[j.depth-1].n = 0
			}
			continue
		}
		if !j.picking && j.inObject() && j.depth <= 2 {
			if path := j.pickedPath(); path != "" {
				j.picking, j.overflow, j.pickAt, j.path, j.value = true, false, j.depth, path, j.value[:0]
				j.scalar = c != '"' && c != '{' && c != '['
				j.quoted = c == '"'
			}
		}
		if j.picking {
			j.add(c)
		}
		switch c {
		case '"':
			j.inString = true
		case '{', '[':
			j.depth++
			if j.depth <= 64 {
				if c == '{' {
					j.objects |= 1 << (j.depth - 1)
				} else {
					j.objects &^= 1 << (j.depth - 1)
				}
			}
			j.expKey = c == '{'
		}
	}
}

// pickedPath is the path of the value starting now when it is one the meter picks, else "".
func (j *jsonPicker) pickedPath() string {
	k := &j.keys[0]
	if j.depth == 2 {
		if !k.is("message") {
			return ""
		}
		k = &j.keys[1]
	}
	for _, name := range [...]string{"usage", "model"} {
		if k.is(name) {
			if j.depth == 2 {
				return "message." + name
			}
			return name
		}
	}
	return ""
}

func (j *jsonPicker) addKey(c byte) {
	if len(j.key) < maxPickedKey {
		j.key = append(j.key, c)
	}
}

func (j *jsonPicker) add(c byte) {
	if j.overflow {
		return
	}
	if len(j.value) >= maxPickedValue {
		j.overflow = true
		return
	}
	j.value = append(j.value, c)
}

func (j *jsonPicker) finish() {
	if !j.overflow && j.pick != nil {
		j.pick(j.path, j.value)
	}
	j.picking, j.scalar, j.quoted, j.value = false, false, false, j.value[:0]
}

// meteredBody tees an upstream answer's body into its meter as the reverse proxy reads it; closed before its end
// (the agent went away), it reads on into the meter (drain, reserve.go).
type meteredBody struct {
	io.ReadCloser
	meter *usageMeter
	// eof is set once the body was read to its end; cancel ends the upstream exchange (nil: no reading on).
	eof    bool
	cancel func()
}

func (b *meteredBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		_, _ = b.meter.Write(p[:n])
	}
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *meteredBody) Close() error {
	b.drain()
	return b.ReadCloser.Close()
}
