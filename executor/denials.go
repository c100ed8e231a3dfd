package executor

import (
	"strings"
	"sync"

	"github.com/kewplan/kewplan/executor/ledger"
)

// MaxEgressDenials bounds the denials one run records one by one (ledger rows, events, summary): an agent that
// hammers the proxy must not fill the host's disk. Denials past it are counted only.
const MaxEgressDenials = 1000

// egressDenials are the requests the run's egress proxy refused, as every engine reports them.
type egressDenials struct {
	mu    sync.Mutex
	kept  []ledger.EgressDenial
	total int
}

// egressDenied records one refused request in the ledger, then reports it, up to MaxEgressDenials. The host and
// the refusal sentence hold what the agent asked for, so they are masked like the agent's output: an agent could
// put its credential into a host name.
func (a *applier) egressDenied(d ledger.EgressDenial) {
	names := a.nodeCredentials(d.Node)
	if d.Node == "" || names == nil {
		names = a.planCredentials()
	}
	d.Host, d.Refusal = a.maskAll(d.Host, names), a.maskAll(d.Refusal, names)
	a.denials.mu.Lock()
	a.denials.total++
	keep := a.denials.total <= MaxEgressDenials
	if keep {
		a.denials.kept = append(a.denials.kept, d)
	}
	a.denials.mu.Unlock()
	if !keep {
		return
	}
	if a.ledger != nil {
		if err := a.ledger.RecordEgressDenial(d); err != nil {
			a.warn(d.Node, err.Error())
		}
	}
	a.hook.EgressDenied(d)
}

// planCredentials are every credential name the plan forwards to any node.
func (a *applier) planCredentials() []string {
	if a.opts.Plan == nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, np := range a.opts.Plan.Nodes {
		for _, c := range np.Credentials {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	return out
}

// brokerRequest records a request the egress proxy brokered for a node, with the node's current attempt.
func (a *applier) brokerRequest(r ledger.BrokerRequest) {
	a.mu.Lock()
	if r.Attempt <= 0 || r.Attempt > a.attempts[r.Node] {
		r.Attempt = a.attempts[r.Node] // the proxy names the attempt it admitted a request in; trust no other
	}
	nb := a.nodeBudgets[r.Node]
	a.mu.Unlock()
	r.RunID = a.runID
	r.Model = a.maskAll(r.Model, a.nodeCredentials(r.Node))
	if a.ledger != nil {
		if err := a.ledger.RecordBrokerRequest(r); err != nil {
			a.warn(r.Node, err.Error())
		}
	}
	// The proxy's figures count against the attempt they were made in, as the proxy's own sums do.
	if nb != nil && nb.attempt == r.Attempt {
		nb.brokered(r)
	}
}

// runEvent records an event of the run's shared objects, masked like a warning.
func (a *applier) runEvent(e ledger.RunEvent) {
	e.RunID = a.runID
	e.Message = a.maskAll(e.Message, a.planCredentials())
	if a.ledger == nil {
		return
	}
	if err := a.ledger.RecordRunEvent(e); err != nil {
		a.warn("", err.Error())
	}
}

// summarize fills the summary's denials once the engine's proxy is gone.
func (e *egressDenials) summarize(sum *ApplySummary) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.total == 0 {
		return
	}
	sum.EgressDenials = append([]ledger.EgressDenial(nil), e.kept...)
	sum.EgressDeniedTotal = e.total
}

// runSecrets are values an engine registered (its egress proxy's secrets) that are masked wherever a string
// leaves the apply, as credentials are.
type runSecrets struct {
	mu     sync.Mutex
	values []string
	labels []string // parallel to values
}

func (a *applier) addSecret(v, label string) {
	if len(v) < minSecretBytes {
		return
	}
	a.secrets.mu.Lock()
	a.secrets.values = append(a.secrets.values, v)
	a.secrets.labels = append(a.secrets.labels, label)
	a.secrets.mu.Unlock()
	a.hook.runSecret(v)
}

// maskAll masks the named credentials (maskString) and every registered run secret in s.
func (a *applier) maskAll(s string, names []string) string {
	s = a.maskString(s, names)
	a.secrets.mu.Lock()
	defer a.secrets.mu.Unlock()
	for i, v := range a.secrets.values {
		if strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, "[redacted "+a.secrets.labels[i]+"]")
		}
	}
	return s
}
