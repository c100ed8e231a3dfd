package telemetry

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/kewplan/kewplan/executor/ledger"
)

// instruments are kewplan's meters. Tokens and cost carry kewplan.meter = agent (what the agent's stream
// reported) or proxy (what kewplan's proxy read from the provider's answers), so the two are separate series of
// the same metric; gen_ai.client.token.usage is the GenAI conventions' histogram of each brokered model call.
type instruments struct {
	tokens     metric.Int64Counter
	cost       metric.Float64Counter
	duration   metric.Float64Histogram
	retries    metric.Int64Counter
	denials    metric.Int64Counter
	stops      metric.Int64Counter
	calls      metric.Int64Counter
	tokenUsage metric.Int64Histogram
}

func newInstruments(m metric.Meter) (*instruments, error) {
	var i instruments
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	var err error
	i.tokens, err = m.Int64Counter("kewplan.tokens", metric.WithUnit("{token}"),
		metric.WithDescription("Tokens by node, runner, model, token type and meter (agent or proxy)."))
	add(err)
	i.cost, err = m.Float64Counter("kewplan.cost", metric.WithUnit("USD"),
		metric.WithDescription("Cost in dollars by node, runner, model and meter (agent or proxy)."))
	add(err)
	i.duration, err = m.Float64Histogram("kewplan.node.duration", metric.WithUnit("s"),
		metric.WithDescription("How long each node ran, every attempt included."))
	add(err)
	i.retries, err = m.Int64Counter("kewplan.node.retries", metric.WithUnit("{retry}"),
		metric.WithDescription("Attempts after a node's first."))
	add(err)
	i.denials, err = m.Int64Counter("kewplan.egress.denials", metric.WithUnit("{request}"),
		metric.WithDescription("Requests the egress proxy refused."))
	add(err)
	i.stops, err = m.Int64Counter("kewplan.budget.stops", metric.WithUnit("{stop}"),
		metric.WithDescription("Nodes, and applies, stopped at a budget cap."))
	add(err)
	i.calls, err = m.Int64Counter("kewplan.model.calls", metric.WithUnit("{call}"),
		metric.WithDescription("Brokered model calls by node, model and HTTP status."))
	add(err)
	i.tokenUsage, err = m.Int64Histogram("gen_ai.client.token.usage", metric.WithUnit("{token}"),
		metric.WithDescription("Tokens of each brokered model call, as the provider reported them."))
	add(err)
	if len(errs) > 0 {
		return nil, fmt.Errorf("OpenTelemetry instruments: %v", errs)
	}
	return &i, nil
}

// node records a finished node's agent-meter figures, its duration and retries.
func (i *instruments) node(e *Exporter, res *ledger.NodeResult, attempts int) {
	ctx := context.Background()
	base := []attribute.KeyValue{e.str("kewplan.node", res.Node), e.str("kewplan.runner", res.Runner), e.str("gen_ai.request.model", res.Model)}
	agent := append(base[:len(base):len(base)], e.str("kewplan.meter", "agent"))
	i.addTokens(e, agent, res.Totals.InputTokens, res.Totals.OutputTokens, res.Totals.CacheReadTokens, res.Totals.CacheWriteTokens)
	if cost, src := res.RecordedCost(); cost != nil {
		i.cost.Add(ctx, *cost, metric.WithAttributes(append(agent, e.str("kewplan.cost.source", src))...))
	}
	if d := res.Duration(); d > 0 {
		i.duration.Record(ctx, d.Seconds(), metric.WithAttributes(append(base, e.str("kewplan.node.status", res.Status))...))
	}
	if n := max(res.Attempts, attempts) - 1; n > 0 {
		i.retries.Add(ctx, int64(n), metric.WithAttributes(base...))
	}
	if res.Budget != nil {
		i.budgetStop(e, res.Node, res.Budget)
	}
}

func (i *instruments) addTokens(e *Exporter, attrs []attribute.KeyValue, in, out, cacheRead, cacheWrite int64) {
	for _, t := range []struct {
		kind string
		n    int64
	}{{"input", in}, {"output", out}, {"cache_read", cacheRead}, {"cache_write", cacheWrite}} {
		if t.n > 0 {
			i.tokens.Add(context.Background(), t.n, metric.WithAttributes(append(attrs[:len(attrs):len(attrs)], e.str("gen_ai.token.type", t.kind))...))
		}
	}
}

func (i *instruments) denial(e *Exporter, d ledger.EgressDenial) {
	i.denials.Add(context.Background(), 1, metric.WithAttributes(e.str("kewplan.node", d.Node), e.str("kewplan.egress.reason", d.Reason)))
}

func (i *instruments) budgetStop(e *Exporter, node string, b *ledger.BudgetStop) {
	i.stops.Add(context.Background(), 1, metric.WithAttributes(e.str("kewplan.node", node), e.str("kewplan.budget.scope", b.Scope), e.str("kewplan.budget.cap", b.Cap)))
}

// modelCall records a brokered request's proxy-meter figures.
func (i *instruments) modelCall(e *Exporter, r ledger.BrokerRequest, runner, model string) {
	if !r.ModelCall {
		return
	}
	ctx := context.Background()
	base := []attribute.KeyValue{e.str("kewplan.node", r.Node), e.str("kewplan.runner", runner), e.str("gen_ai.request.model", model)}
	i.calls.Add(ctx, 1, metric.WithAttributes(append(base[:len(base):len(base)], attribute.Int("http.response.status_code", r.Status))...))
	proxy := append(base[:len(base):len(base)], e.str("kewplan.meter", "proxy"))
	i.addTokens(e, proxy, r.InputTokens, r.OutputTokens, r.CacheReadTokens, r.CacheWriteTokens)
	if r.CostUSD != nil {
		i.cost.Add(ctx, *r.CostUSD, metric.WithAttributes(append(proxy[:len(proxy):len(proxy)], e.str("kewplan.cost.source", r.CostSource))...))
	}
	usage := []attribute.KeyValue{e.str("gen_ai.operation.name", "chat"), e.str("gen_ai.request.model", model), e.str("gen_ai.response.model", r.Model)}
	if r.Metered {
		i.tokenUsage.Record(ctx, r.InputTokens, metric.WithAttributes(append(usage[:len(usage):len(usage)], e.str("gen_ai.token.type", "input"))...))
		i.tokenUsage.Record(ctx, r.OutputTokens, metric.WithAttributes(append(usage[:len(usage):len(usage)], e.str("gen_ai.token.type", "output"))...))
	}
}
