package egress

import (
	"fmt"
	"mime"
	"net/http"
	"strings"
	"sync"

	"github.com/dustin/go-humanize"

	"github.com/kewplan/kewplan/internal/money"
)

// Budgets at the broker. The proxy meters every brokered answer from the provider's own usage (meter.go), sums it
// per node and attempt (apply says when a retry starts: StartAttempt), and refuses a node's next model call once its sums have crossed one of its caps (BrokerBudget), in the
// API's error shape, naming the cap and where to raise it. A model call is a brokered POST: every one counts
// against max_turns, forwarded or refused. The call that crosses a cap completes (the proxy never cuts an answer
// for money); concurrent calls admitted before it may complete too. Apply reads the figures from the decision
// lines and stops the node on the larger of the agent's meter and the proxy's.

// ReasonBudgetExceeded is the reason of a model call refused at a cap.
const ReasonBudgetExceeded = "budget exceeded"

// BrokerPrice is a model's price in USD per million tokens, as the plan's price table gives it.
type BrokerPrice struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cache_read"`
	CacheWrite float64 `json:"cache_write"`
}

func (p *BrokerPrice) cost(u BrokerUsage) float64 {
	return (float64(u.InputTokens)*p.Input + float64(u.OutputTokens)*p.Output + float64(u.CacheReadTokens)*p.CacheRead +
		float64(u.CacheWriteTokens)*p.CacheWrite) / 1e6
}

// BrokerBudget is a node's caps as the broker enforces them on what it metered; a zero cap is no cap.
type BrokerBudget struct {
	MaxUSD    float64 `json:"max_usd,omitempty"`
	MaxTokens int64   `json:"max_tokens,omitempty"`
	MaxTurns  int64   `json:"max_turns,omitempty"`
	// Attempts is how many attempts the plan gives the node (0: one): each cap holds for an attempt, and the
	// node's sums across its attempts are bounded by the cap × Attempts.
	Attempts int64 `json:"attempts,omitempty"`
	// Where names the file that sets the caps ("fix.hcl"), for the refusal's advice; "" says "the configuration".
	Where string `json:"where,omitempty"`
}

// Meter is a brokered request's part of its decision line: whether it was a model call, what the provider
// reported for it, and for a call refused at a cap, which cap.
type Meter struct {
	ModelCall bool `json:"model_call,omitempty"`
	// Usage is the answer's usage; nil when the answer was not metered (refused, or an encoding the meter does
	// not read).
	Usage *BrokerUsage `json:"usage,omitempty"`
	// Cap, Limit and Value name the cap a refusal was judged on and the node's metered figure.
	Cap   string  `json:"cap,omitempty"`
	Limit float64 `json:"limit,omitempty"`
	Value float64 `json:"value,omitempty"`
	// Reserved is a model call's reservation (reserve.go); Unsettled says the call ended without the provider's
	// final usage, so Usage is its reservation (or the larger usage read before the end).
	Reserved  *Reserved `json:"reserved,omitempty"`
	Unsettled bool      `json:"unsettled,omitempty"`
}

// nodeMeter is one attempt of a node: its metered sums at the broker.
type nodeMeter struct {
	attempt  int
	mu       sync.Mutex
	calls    int64 // model calls forwarded
	usage    BrokerUsage
	anyCost  bool // some answer's cost is known
	costGaps bool // some answer reported usage but no cost could be had
	// openTokens and openUSD are the reservations of the model calls admitted and not yet ended; unsettled
	// counts the calls that ended without the provider's final usage (their reservations stay in usage).
	openCalls  int64
	openTokens int64
	openUSD    float64
	unsettled  int64
}

// add sums one metered answer.
func (m *nodeMeter) add(u BrokerUsage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.usage.InputTokens += u.InputTokens
	m.usage.OutputTokens += u.OutputTokens
	m.usage.CacheReadTokens += u.CacheReadTokens
	m.usage.CacheWriteTokens += u.CacheWriteTokens
	if u.Model != "" {
		m.usage.Model = u.Model
	}
	switch u.CostSource {
	case CostReported, CostEstimated:
		m.usage.CostUSD += u.CostUSD
		m.anyCost = true
	default:
		if u.Reported {
			m.costGaps = true
		}
	}
}

// budgetSentence is the refusal of a model call at a cap.
func budgetSentence(node string, b *BrokerBudget, cap string, limit, value float64) string {
	where := "the configuration"
	if b.Where != "" {
		where = b.Where
	}
	var caught string
	switch cap {
	case "max_usd":
		l, v := money.Distinct(limit, value)
		caught = fmt.Sprintf("max_usd = %s (proxy metered $%s)", l, v)
	case "max_tokens":
		caught = fmt.Sprintf("max_tokens = %s (proxy metered %s tokens)", humanize.Comma(int64(limit)), humanize.Comma(int64(value)))
	default:
		caught = fmt.Sprintf("max_turns = %s (this would be model call %s)", humanize.Comma(int64(limit)), humanize.Comma(int64(value)))
	}
	return fmt.Sprintf("kewplan's credential broker refused this model call because node %s reached its budget %s; raise budget { %s } in %s to continue.",
		node, caught, cap, where)
}

// meterResponse (the reverse proxy's ModifyResponse) tees the answer's body into a meter. An answer with a
// content encoding is not metered: the broker asks for identity (rewriteBrokered drops Accept-Encoding and the
// transport adds none), so only an upstream that ignores that sends one.
func (s *Server) meterResponse(res *http.Response) error {
	br, ok := res.Request.Context().Value(brokerCtxKey{}).(*brokered)
	if !ok || res.Body == nil || res.Body == http.NoBody {
		return nil
	}
	if ce := res.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		return nil
	}
	mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type"))
	br.meter = newUsageMeter(mt == "text/event-stream")
	br.upstreamStatus = res.StatusCode
	br.body = &meteredBody{ReadCloser: res.Body, meter: br.meter, cancel: br.cancel}
	if !br.modelCall {
		br.body.cancel = nil // nothing to settle: the answer is not read on once the agent went away
	}
	res.Body = br.body
	return nil
}

// meterRecord sums a forwarded answer into its node's meter and returns its part of the decision line.
func (br *brokered) meterRecord() *Meter {
	if !br.modelCall && br.meter == nil {
		return nil
	}
	m := &Meter{ModelCall: br.modelCall}
	var u *BrokerUsage
	if br.meter != nil {
		x := br.meter.result(br.node.price)
		u = &x
	}
	if br.reserved == nil {
		if u != nil {
			br.sums.add(*u)
			br.node.total.add(*u)
		}
		m.Usage = u
		return m
	}
	// Settled: the final usage was read, or a whole answer with an error status (the provider bills none).
	settled := br.status == 0 && br.meter != nil && (br.meter.final ||
		br.body != nil && br.body.eof && (br.upstreamStatus < 200 || br.upstreamStatus > 299))
	got := br.sums.settle(*br.reserved, u, settled, br.node.price)
	br.node.total.settle(*br.reserved, u, settled, br.node.price)
	m.Usage, m.Reserved, m.Unsettled = &got, br.reserved, !settled
	return m
}
