package adapter

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/kewplan/kewplan/egress"
	"github.com/kewplan/kewplan/executor/ledger"
)

// ProxyLog reads the decision log of a run's egress proxy (kewplan's own, one egress.Decision as JSON per line),
// whichever engine runs it: Docker copies the proxy container's stdout into it, Kubernetes the proxy pod's log. A
// refused request is recorded through Run.EgressDenied; a brokered one (with the proxy's meter of it) through
// Run.BrokerRequest, which counts it against the node's attempt and its budget. Lines that are not decisions
// (the proxy's own messages, on Kubernetes merged into the same log) and control calls are skipped.
type ProxyLog struct {
	run   *Run
	users map[string]string // proxy user -> node name
	lines lineSplitter
	mu    sync.Mutex
	marks map[string]chan struct{} // control paths awaited (Await)
}

// NewProxyLog reads the decision log of run's proxy, whose users stand for the nodes users maps them to.
func NewProxyLog(run *Run, users map[string]string) *ProxyLog {
	p := &ProxyLog{run: run, users: users}
	p.lines = lineSplitter{max: 64 << 10, line: p.decision}
	return p
}

var _ io.Writer = (*ProxyLog)(nil)

// Write takes the log's bytes; a line longer than 64 KiB is dropped whole.
func (p *ProxyLog) Write(b []byte) (int, error) { return p.lines.Write(b) }

// Flush reads a last line without its newline, once the log has ended.
func (p *ProxyLog) Flush() { p.lines.flush() }

// Await is closed once the log has carried a control call on path (its egress.Decision.Path, as the proxy
// escaped it): the mark that every line the proxy wrote before its answer to that call has been read.
func (p *ProxyLog) Await(path string) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.marks == nil {
		p.marks = map[string]chan struct{}{}
	}
	ch := p.marks[path]
	if ch == nil {
		ch = make(chan struct{})
		p.marks[path] = ch
	}
	return ch
}

// decision reads one line of the log.
func (p *ProxyLog) decision(line []byte) {
	var dec egress.Decision
	if err := json.Unmarshal(line, &dec); err != nil {
		return
	}
	if dec.Kind == egress.KindControl {
		p.mu.Lock()
		if ch := p.marks[dec.Path]; ch != nil {
			close(ch)
			delete(p.marks, dec.Path)
		}
		p.mu.Unlock()
		return
	}
	node := p.users[dec.Node]
	if node == "" && dec.Node != "" {
		node = dec.Node
	}
	t := dec.Time
	if t.IsZero() {
		t = time.Now()
	}
	if dec.Kind == egress.KindBroker && p.run.BrokerRequest != nil {
		p.run.BrokerRequest(brokerRequest(dec, node, t))
	}
	if dec.Allowed || p.run.EgressDenied == nil {
		return
	}
	p.run.EgressDenied(ledger.EgressDenial{RunID: p.run.ID, Node: node, Method: clipText(dec.Method, 16), Host: clipText(dec.Host, 260), Port: dec.Port,
		Reason: clipText(dec.Reason, 200), Refusal: clipText(dec.Refusal, 1000), Time: t})
}

// brokerRequest is the ledger's row of one brokered request; a refusal's reason holds the sentence the agent was
// answered with.
func brokerRequest(dec egress.Decision, node string, t time.Time) ledger.BrokerRequest {
	reason := ""
	if !dec.Allowed {
		reason = dec.Reason
		if dec.Refusal != "" {
			reason += ": " + dec.Refusal
		}
		reason = clipText(reason, 600)
	}
	r := ledger.BrokerRequest{Node: node, Attempt: dec.Attempt, Method: clipText(dec.Method, 16), Host: clipText(dec.Host, 260),
		Path: clipText(dec.Path, 512), Status: dec.Status, Credential: clipText(dec.Credential, 128), BytesIn: dec.BytesIn,
		BytesOut: dec.BytesOut, DurationMS: dec.DurationMS, FirstByteMS: dec.FirstByteMS, Reason: reason, Time: t}
	if m := dec.Meter; m != nil {
		r.ModelCall, r.BudgetCap, r.Unsettled = m.ModelCall, clipText(m.Cap, 16), m.Unsettled
		if u := m.Usage; u != nil {
			r.Metered, r.Model, r.CostSource = true, clipText(u.Model, 200), clipText(u.CostSource, 16)
			r.InputTokens, r.OutputTokens = max(u.InputTokens, 0), max(u.OutputTokens, 0)
			r.CacheReadTokens, r.CacheWriteTokens = max(u.CacheReadTokens, 0), max(u.CacheWriteTokens, 0)
			if u.CostSource == egress.CostReported || u.CostSource == egress.CostEstimated {
				c := max(u.CostUSD, 0)
				r.CostUSD = &c
			}
		}
	}
	return r
}

// clipText makes s valid UTF-8 of at most n bytes.
func clipText(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) > n {
		return s[:n]
	}
	return s
}

// lineSplitter calls line for each complete line written to it; a line longer than max is dropped whole.
type lineSplitter struct {
	mu   sync.Mutex
	max  int
	buf  []byte
	skip bool
	line func([]byte)
}

func (w *lineSplitter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if !w.skip {
				w.buf = append(w.buf, p...)
				if len(w.buf) > w.max {
					w.buf, w.skip = w.buf[:0], true
				}
			}
			break
		}
		if !w.skip {
			w.buf = append(w.buf, p[:i]...)
			if len(w.buf) <= w.max {
				w.line(w.buf)
			}
		}
		w.buf, w.skip = w.buf[:0], false
		p = p[i+1:]
	}
	return n, nil
}

// flush hands over a last line without its newline.
func (w *lineSplitter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 && !w.skip {
		w.line(w.buf)
	}
	w.buf = w.buf[:0]
}
