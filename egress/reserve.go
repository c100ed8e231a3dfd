package egress

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/kewplan/kewplan/internal/money"
)

// Pessimistic metering. A model call is admitted only against its worst case, reserved before it goes out: its
// max_tokens (bounded by the model's maximum output; the maximum when it names none) at the output price, plus
// its input estimated from the body (a token per 4 bytes) at the input price. The call is refused when that
// reservation, the node's sums and the reservations of its open calls would together cross a cap, for the
// attempt and for the node across its attempts. When the call ends it settles to the provider's figure if the
// final usage was read; a call that ended without it (the agent hung up and the provider sent nothing more, an
// encoded answer, an upstream failure) keeps its reservation and is "unsettled". After the agent hangs up the
// broker reads the answer on, bounded (drainBytes, drainTime, and never past the node's end), so that the
// provider's figure is known whenever the provider sends it.

// Limits of a brokered request's body and of the reading on after the agent went away.
const (
	// MaxBrokeredBody bounds a brokered request's body, which the broker reads whole before forwarding it (the
	// reservation is judged on it): Anthropic's own bound on a Messages request is 32 MB.
	MaxBrokeredBody = 32 << 20
	// drainBytes and drainTime bound what the broker reads of an answer after the agent stopped reading it.
	drainBytes = 8 << 20
	drainTime  = 60 * time.Second
	// DefaultMaxOutputTokens is the output a request may ask for when the node's configuration names no model
	// maximum (BrokerConfig.MaxOutputTokens).
	DefaultMaxOutputTokens = 128_000
	// bytesPerInputToken is the input estimate's rate: generous, since a token is about 4 characters of English.
	bytesPerInputToken = 4
)

// Reasons of a brokered request refused before its reservation.
const (
	ReasonBodyTooLarge = "request body too large"
	ReasonBadBody      = "request body not one JSON object"
	ReasonUsageOff     = "usage reporting turned off"
)

// Reserved is a model call's reservation as its decision line shows it.
type Reserved struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	// CostUSD is the reservation at the node's price; absent when the node has none.
	CostUSD *float64 `json:"cost_usd,omitempty"`
}

// Tokens is what max_tokens counts of the reservation.
func (r Reserved) Tokens() int64 { return r.InputTokens + r.OutputTokens }

func (r Reserved) usd() float64 {
	if r.CostUSD == nil {
		return 0
	}
	return *r.CostUSD
}

// admitBrokered judges a brokered request after its node, placeholder and endpoint were checked: its method and
// path against the node's list, its body (read whole, bounded), the usage reporting it asks for, and the node's
// caps with the call's reservation. It returns a refusal (status, reason, sentence), or "" with br ready to
// forward (r.Body replaced by the bytes read, rewritten only where usage reporting was forced on).
func (s *Server) admitBrokered(r *http.Request, br *brokered, d *Decision) (int, string, string) {
	bn := br.node
	p, ok := matchBrokerPath(bn.paths, r.Method, br.path)
	if !ok {
		return http.StatusForbidden, ReasonPathNotAllowed, pathSentence(bn.name, r.Method, br.path, bn.paths)
	}
	br.modelCall = p.ModelCall
	if s.broker.unmetered.Load() {
		return 0, "", ""
	}
	var body []byte
	if r.ContentLength > MaxBrokeredBody {
		return http.StatusRequestEntityTooLarge, ReasonBodyTooLarge, fmt.Sprintf(
			"kewplan's credential broker refused this request to node %s because its body is larger than the broker's bound of %s; send a smaller request.",
			bn.name, humanize.IBytes(MaxBrokeredBody))
	}
	if r.Body != nil && r.Body != http.NoBody {
		b, err := io.ReadAll(io.LimitReader(r.Body, MaxBrokeredBody+1))
		if err != nil {
			return http.StatusBadRequest, ReasonBadBody, fmt.Sprintf("kewplan's credential broker refused this request to node %s because its body could not be read (%s).", bn.name, clip(err.Error()))
		}
		if len(b) > MaxBrokeredBody {
			return http.StatusRequestEntityTooLarge, ReasonBodyTooLarge, fmt.Sprintf(
				"kewplan's credential broker refused this request to node %s because its body is larger than the broker's bound of %s; send a smaller request.",
				bn.name, humanize.IBytes(MaxBrokeredBody))
		}
		body = b
	}
	if f := judgeProviderFetch(bn, r, body); f != nil {
		return f.status, f.reason, f.sentence
	}
	if !br.modelCall {
		if cap, limit, value := crossedCap(br.sums, &bn.total, bn.budget); cap != "" {
			d.Meter = &Meter{Cap: cap, Limit: limit, Value: value}
			return http.StatusPaymentRequired, ReasonBudgetExceeded, crossedSentence(bn.name, bn.budget, cap, limit, value)
		}
		setBody(r, body)
		return 0, "", ""
	}
	req, why := parseModelRequest(body)
	if why != "" {
		return http.StatusBadRequest, ReasonBadBody, fmt.Sprintf("kewplan's credential broker refused this model call to node %s because %s; the broker reads a model call's body to reserve its cost.", bn.name, why)
	}
	if bn.api == BrokerAPIOpenAI {
		rewritten, why := req.forceUsage()
		if why != "" {
			return http.StatusBadRequest, ReasonUsageOff, fmt.Sprintf("kewplan's credential broker refused this model call to node %s because %s, and the broker meters every call from the usage the provider reports; remove it.", bn.name, why)
		}
		if rewritten != nil {
			body = rewritten
		}
	}
	res := bn.reservation(req, len(body))
	br.reserved = &res
	if c := admitReservation(br.sums, &bn.total, bn.budget, res); c.cap != "" {
		d.Meter = &Meter{ModelCall: true, Cap: c.cap, Limit: c.limit, Value: c.value, Reserved: &res}
		if c.cap == "max_turns" {
			return http.StatusPaymentRequired, ReasonBudgetExceeded, budgetSentence(bn.name, bn.budget, c.cap, c.limit, c.value)
		}
		return http.StatusPaymentRequired, ReasonBudgetExceeded, reservationSentence(bn.name, bn.budget, c, res)
	}
	setBody(r, body)
	return 0, "", ""
}

// setBody makes the bytes read the request's body, forwarded with their length.
func setBody(r *http.Request, body []byte) {
	if r.Body == nil || r.Body == http.NoBody {
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.TransferEncoding = nil
	r.Header.Set("Content-Length", strconv.Itoa(len(body)))
	if len(body) == 0 {
		r.Body = http.NoBody
	}
}

// modelRequest is the top level of a model call's JSON body, in order, with the values the reservation reads.
type modelRequest struct {
	keys []string
	raws []json.RawMessage
	// maxOutput is the largest output the request asks for (max_tokens, max_completion_tokens); -1 for none.
	maxOutput int64
}

func (m *modelRequest) value(key string) (json.RawMessage, bool) {
	for i, k := range m.keys {
		if k == key {
			return m.raws[i], true
		}
	}
	return nil, false
}

// parseModelRequest reads the top level of a model call's body; why says what makes it unreadable (not one JSON
// object, a key given twice: a provider and the broker could read two different requests from it).
func parseModelRequest(body []byte) (*modelRequest, string) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, "its body is not a JSON object"
	}
	m := &modelRequest{maxOutput: -1}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		key, ok := t.(string)
		if err != nil || !ok {
			return nil, "its body is not a JSON object"
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, "its body is not a JSON object"
		}
		if seen[key] {
			return nil, fmt.Sprintf("its body gives the key %q twice", clip(key))
		}
		seen[key] = true
		m.keys, m.raws = append(m.keys, key), append(m.raws, raw)
		if key == "max_tokens" || key == "max_completion_tokens" {
			var f float64
			if json.Unmarshal(raw, &f) == nil && f >= 0 && !math.IsInf(f, 0) {
				m.maxOutput = max(m.maxOutput, int64(min(math.Ceil(f), math.MaxInt32)))
			}
		}
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, "its body is not a JSON object"
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, "its body has more after its JSON object"
	}
	return m, ""
}

// forceUsage makes an OpenAI-style streamed request report its usage (stream_options.include_usage = true), the
// body rewritten (nil: unchanged); why refuses a request that turns usage reporting off explicitly
// (stream_options.include_usage = false, OpenRouter's usage.include = false).
func (m *modelRequest) forceUsage() ([]byte, string) {
	if raw, ok := m.value("usage"); ok {
		var u map[string]json.RawMessage
		if json.Unmarshal(raw, &u) == nil && string(bytes.TrimSpace(u["include"])) == "false" {
			return nil, "it sets usage.include = false"
		}
	}
	raw, ok := m.value("stream")
	if !ok || string(bytes.TrimSpace(raw)) != "true" {
		return nil, "" // a whole answer carries its usage
	}
	opts := map[string]json.RawMessage{}
	if raw, ok := m.value("stream_options"); ok && string(bytes.TrimSpace(raw)) != "null" {
		if json.Unmarshal(raw, &opts) != nil {
			return nil, "its stream_options is not an object"
		}
		switch string(bytes.TrimSpace(opts["include_usage"])) {
		case "true":
			return nil, ""
		case "false":
			return nil, "it sets stream_options.include_usage = false"
		}
	}
	opts["include_usage"] = json.RawMessage("true")
	o, _ := json.Marshal(opts)
	var b bytes.Buffer
	b.WriteByte('{')
	found := false
	for i, k := range m.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		if k == "stream_options" {
			b.Write(o)
			found = true
		} else {
			b.Write(m.raws[i])
		}
	}
	if !found {
		b.WriteString(`,"stream_options":`)
		b.Write(o)
	}
	b.WriteByte('}')
	return b.Bytes(), ""
}

// reservation is a model call's worst case.
func (bn *brokerNode) reservation(req *modelRequest, bodyBytes int) Reserved {
	most := bn.maxOutput
	if most <= 0 {
		most = DefaultMaxOutputTokens
	}
	out := most
	if req.maxOutput >= 0 && req.maxOutput < most {
		out = req.maxOutput
	}
	r := Reserved{InputTokens: int64((bodyBytes + bytesPerInputToken - 1) / bytesPerInputToken), OutputTokens: out}
	if p := bn.price; p != nil {
		c := (float64(r.InputTokens)*p.Input + float64(r.OutputTokens)*p.Output) / 1e6
		r.CostUSD = &c
	}
	return r
}

// capCheck is a cap a reservation would cross: which, its limit (× the attempts for the node-wide sum), the
// figure with the reservation, and for the sentence the sums and open reservations it was judged on.
type capCheck struct {
	cap          string
	limit, value float64
	metered      float64
	open         float64
	nodeWide     bool
	attempts     int64
}

// admitReservation admits a model call against the attempt's sums and the node's (across attempts, where each
// cap is the attempt's × the plan's attempts), their open reservations and the call's own, and on admission
// reserves it in both; a refusal reserves nothing. Both meters are locked together, attempt first.
func admitReservation(attempt, node *nodeMeter, b *BrokerBudget, res Reserved) capCheck {
	attempt.mu.Lock()
	defer attempt.mu.Unlock()
	node.mu.Lock()
	defer node.mu.Unlock()
	if b != nil {
		n := max(b.Attempts, 1)
		for _, m := range []struct {
			meter *nodeMeter
			scale int64
		}{{attempt, 1}, {node, n}} {
			c := m.meter.wouldCross(b, m.scale, res)
			if c.cap != "" {
				c.nodeWide, c.attempts = m.meter == node, n
				return c
			}
		}
	}
	for _, m := range []*nodeMeter{attempt, node} {
		m.calls++
		m.openCalls++
		m.openTokens += res.Tokens()
		m.openUSD += res.usd()
	}
	return capCheck{}
}

// unreserve takes back an admitted call's reservation and its turn: the call was refused after all, before it
// went out.
func unreserve(attempt, node *nodeMeter, res Reserved) {
	for _, m := range []*nodeMeter{attempt, node} {
		m.mu.Lock()
		m.calls--
		m.openCalls--
		m.openTokens -= res.Tokens()
		m.openUSD -= res.usd()
		m.mu.Unlock()
	}
}

// wouldCross is the first cap (× scale) that the meter's sums, its open reservations and res would cross; the
// caller holds m.mu.
func (m *nodeMeter) wouldCross(b *BrokerBudget, scale int64, res Reserved) capCheck {
	usd := b.MaxUSD * float64(scale)
	tokens := b.MaxTokens * scale
	switch {
	case b.MaxUSD > 0 && (m.anyCost || res.CostUSD != nil) && m.usage.CostUSD+m.openUSD+res.usd() > usd:
		return capCheck{cap: "max_usd", limit: usd, value: m.usage.CostUSD + m.openUSD + res.usd(), metered: m.usage.CostUSD, open: m.openUSD}
	case b.MaxTokens > 0 && m.usage.Tokens()+m.openTokens+res.Tokens() > tokens:
		return capCheck{cap: "max_tokens", limit: float64(tokens), value: float64(m.usage.Tokens() + m.openTokens + res.Tokens()),
			metered: float64(m.usage.Tokens()), open: float64(m.openTokens)}
	case b.MaxTurns > 0 && m.calls >= b.MaxTurns*scale:
		return capCheck{cap: "max_turns", limit: float64(b.MaxTurns * scale), value: float64(m.calls + 1)}
	}
	return capCheck{}
}

// crossedCap is the cap a request that reserves nothing (a GET, count_tokens) is refused at: one the attempt's or
// the node's sums with their open reservations have reached.
func crossedCap(attempt, node *nodeMeter, b *BrokerBudget) (string, float64, float64) {
	if b == nil {
		return "", 0, 0
	}
	n := max(b.Attempts, 1)
	for _, m := range []struct {
		meter *nodeMeter
		scale int64
	}{{attempt, 1}, {node, n}} {
		m.meter.mu.Lock()
		usd, tokens := m.meter.usage.CostUSD+m.meter.openUSD, m.meter.usage.Tokens()+m.meter.openTokens
		anyCost := m.meter.anyCost || m.meter.openUSD > 0
		m.meter.mu.Unlock()
		switch {
		case b.MaxUSD > 0 && anyCost && usd >= b.MaxUSD*float64(m.scale):
			return "max_usd", b.MaxUSD * float64(m.scale), usd
		case b.MaxTokens > 0 && tokens >= b.MaxTokens*m.scale:
			return "max_tokens", float64(b.MaxTokens * m.scale), float64(tokens)
		}
	}
	return "", 0, 0
}

// settle ends a model call's reservation: to the provider's figure when the final usage was read (settled), else
// to the larger of the reservation and whatever usage was read, which then stays summed as unsettled.
func (m *nodeMeter) settle(res Reserved, u *BrokerUsage, settled bool, price *BrokerPrice) BrokerUsage {
	var got BrokerUsage
	if u != nil {
		got = *u
	}
	if !settled {
		got.InputTokens = max(got.InputTokens, res.InputTokens)
		got.OutputTokens = max(got.OutputTokens, res.OutputTokens)
		if res.CostUSD != nil && (got.CostSource == CostUnknown || got.CostSource == "" || got.CostUSD < *res.CostUSD) {
			got.CostUSD, got.CostSource = *res.CostUSD, CostEstimated
		}
		if got.CostSource == "" {
			got.CostSource = CostUnknown
		}
	}
	m.mu.Lock()
	m.openCalls--
	m.openTokens -= res.Tokens()
	m.openUSD -= res.usd()
	if !settled {
		m.unsettled++
	}
	m.mu.Unlock()
	m.add(got)
	return got
}

// reservationSentence is the refusal of a model call whose reservation would cross a cap: the cap, the
// reservation and the figure.
func reservationSentence(node string, b *BrokerBudget, c capCheck, res Reserved) string {
	where := "the configuration"
	if b.Where != "" {
		where = b.Where
	}
	budget := "its budget"
	limit := ""
	if c.nodeWide {
		budget = fmt.Sprintf("its budget across its %d attempts", c.attempts)
	}
	var figures string
	switch c.cap {
	case "max_usd":
		limit = money.Amount(c.limit)
		figures = fmt.Sprintf("the proxy metered $%s, open calls reserve $%s and this call reserves $%s (%s tokens of output at most and about %s of input), $%s in all",
			money.Amount(c.metered), money.Amount(c.open), money.Amount(res.usd()), humanize.Comma(res.OutputTokens), humanize.Comma(res.InputTokens), money.Amount(c.value))
	default:
		limit = humanize.Comma(int64(c.limit))
		figures = fmt.Sprintf("the proxy metered %s tokens, open calls reserve %s and this call reserves %s (%s of output at most and about %s of input), %s in all",
			humanize.Comma(int64(c.metered)), humanize.Comma(int64(c.open)), humanize.Comma(res.Tokens()), humanize.Comma(res.OutputTokens),
			humanize.Comma(res.InputTokens), humanize.Comma(int64(c.value)))
	}
	return fmt.Sprintf("kewplan's credential broker refused this model call because it could take node %s past %s %s = %s: %s; lower the request's max_tokens, or raise budget { %s } in %s.",
		node, budget, c.cap, limit, figures, c.cap, where)
}

// crossedSentence is the refusal of a request that reserves nothing, once the node has reached a cap.
func crossedSentence(node string, b *BrokerBudget, cap string, limit, value float64) string {
	where := "the configuration"
	if b.Where != "" {
		where = b.Where
	}
	caught := fmt.Sprintf("max_tokens = %s (proxy metered and reserved %s tokens)", humanize.Comma(int64(limit)), humanize.Comma(int64(value)))
	if cap == "max_usd" {
		l, v := money.Distinct(limit, value)
		caught = fmt.Sprintf("max_usd = %s (proxy metered and reserved $%s)", l, v)
	}
	return fmt.Sprintf("kewplan's credential broker refused this request because node %s reached its budget %s; raise budget { %s } in %s to continue.",
		node, caught, cap, where)
}

// drainingBody is meteredBody's reading on: once the agent stops reading an answer whose final usage has not
// been read, Close reads the rest into the meter, bounded by drainBytes and drainTime (cancel ends the upstream
// exchange at the bound) and by the node's end, which cancels the exchange too.
func (b *meteredBody) drain() {
	if b.eof || b.meter.final || b.cancel == nil {
		return
	}
	t := time.AfterFunc(drainTime, b.cancel)
	defer t.Stop()
	buf := make([]byte, 32<<10)
	left := int64(drainBytes)
	for left > 0 {
		n, err := b.ReadCloser.Read(buf[:min(int64(len(buf)), left)])
		if n > 0 {
			_, _ = b.meter.Write(buf[:n])
			left -= int64(n)
		}
		if err != nil || b.meter.final {
			if errors.Is(err, io.EOF) {
				b.eof = true
			}
			return
		}
	}
}
