package telemetry

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/kewplan/kewplan/executor"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/statedir"
)

// workerState is what the worker keeps between events: the apply's span, the ledger it reads, each node's
// attempts' span contexts (the parents of its model calls) and what arrived for a node before its end.
type workerState struct {
	runID    string
	dir      statedir.Dir
	rootCtx  context.Context
	root     trace.Span
	ledger   *ledger.Ledger
	ledgerOK bool // the ledger was tried (opened or not)
	started  map[string]time.Time
	retries  map[string][]executor.NodeRetryEvent
	warnings map[string][]executor.BudgetWarningEvent
	phases   map[string][]executor.NodePhaseEvent
	denials  map[string][]ledger.EgressDenial
	done     map[string]bool
	attempts map[string]map[int]trace.SpanContext
	nodeSpan map[string]trace.SpanContext
	runner   map[string]string
	model    map[string]string
	// late are denials that arrived after their node's span was sent; they go on the apply's span.
	late []ledger.EgressDenial
}

func (w *workerState) init() {
	w.rootCtx = context.Background()
	w.started = map[string]time.Time{}
	w.retries = map[string][]executor.NodeRetryEvent{}
	w.warnings = map[string][]executor.BudgetWarningEvent{}
	w.phases = map[string][]executor.NodePhaseEvent{}
	w.denials = map[string][]ledger.EgressDenial{}
	w.done = map[string]bool{}
	w.attempts = map[string]map[int]trace.SpanContext{}
	w.nodeSpan = map[string]trace.SpanContext{}
	w.runner = map[string]string{}
	w.model = map[string]string{}
}

// str is a string attribute, masked: every string kewplan exports passes here.
func (e *Exporter) str(k, v string) attribute.KeyValue { return attribute.String(k, e.mask(v)) }

func (e *Exporter) applyStart(ev executor.ApplyStartEvent) {
	w := &e.w
	w.runID = ev.RunID
	w.dir = statedir.Dir{Root: ev.StateDir}
	attrs := []attribute.KeyValue{
		e.str("kewplan.run.id", ev.RunID),
		e.str("kewplan.config.digest", ev.ConfigDigest),
		attribute.Int("kewplan.nodes", len(ev.Nodes)),
		attribute.Int("kewplan.parallelism", ev.Parallelism),
	}
	if e.opts.PlanDigest != "" {
		attrs = append(attrs, e.str("kewplan.plan.digest", e.opts.PlanDigest))
	}
	if e.opts.Engine != "" {
		attrs = append(attrs, e.str("kewplan.engine", e.opts.Engine))
	}
	w.rootCtx, w.root = e.tracer.Start(context.Background(), "kewplan apply",
		trace.WithTimestamp(ev.Time), trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
}

// openLedger opens the run's ledger for reading once; a failure is warned of and the spans go without attempts.
func (e *Exporter) openLedger() *ledger.Ledger {
	w := &e.w
	if w.ledgerOK {
		return w.ledger
	}
	w.ledgerOK = true
	if w.dir.Root == "" {
		return nil
	}
	l, err := ledger.OpenReadOnly(w.dir.Ledger())
	if err != nil {
		e.warnLater(fmt.Sprintf("OpenTelemetry export: %s; the trace has no attempts or model calls", e.mask(err.Error())))
		return nil
	}
	w.ledger = l
	return l
}

func (e *Exporter) egressDenied(d ledger.EgressDenial) {
	w := &e.w
	e.inst.denial(e, d)
	if d.Node != "" && !w.done[d.Node] {
		w.denials[d.Node] = append(w.denials[d.Node], d)
		return
	}
	w.late = append(w.late, d)
}

func (e *Exporter) denialEvent(d ledger.EgressDenial) trace.EventOption {
	return trace.WithAttributes(
		e.str("kewplan.node", d.Node), e.str("kewplan.egress.method", d.Method), e.str("server.address", d.Host),
		attribute.Int("server.port", d.Port), e.str("kewplan.egress.reason", d.Reason))
}

// nodeSpanTimes are the node's start and end; a node that never started is an instant at its end.
func (e *Exporter) nodeSpanTimes(res *ledger.NodeResult) (time.Time, time.Time) {
	end := res.Ended
	if end.IsZero() {
		end = time.Now()
	}
	start := res.Started
	if start.IsZero() {
		start = e.w.started[res.Node]
	}
	if start.IsZero() || start.After(end) {
		start = end
	}
	return start, end
}

func (e *Exporter) nodeDone(res ledger.NodeResult) {
	w := &e.w
	start, end := e.nodeSpanTimes(&res)
	w.runner[res.Node], w.model[res.Node] = res.Runner, res.Model
	ctx, span := e.tracer.Start(w.rootCtx, "node "+e.mask(res.Node),
		trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(e.nodeAttrs(&res)...))
	w.nodeSpan[res.Node] = span.SpanContext()
	var attempts []ledger.AttemptRecord
	if l := e.openLedger(); l != nil && res.Attempts > 0 {
		all, err := l.Attempts(w.runID)
		if err != nil {
			e.warnLater(fmt.Sprintf("OpenTelemetry export: node %s: %s", e.mask(res.Node), e.mask(err.Error())))
		}
		attempts = all[res.Node]
	}
	for _, a := range attempts {
		e.attemptSpan(ctx, &res, a)
	}
	for _, r := range w.retries[res.Node] {
		span.AddEvent("kewplan.retry", trace.WithTimestamp(r.Time), trace.WithAttributes(
			attribute.Int("kewplan.attempt", r.Attempt), attribute.Int("kewplan.attempt.next", r.NextAttempt),
			attribute.Int("kewplan.attempts.max", r.MaxAttempts), e.str("kewplan.retry.class", r.Class),
			attribute.Float64("kewplan.retry.wait_s", r.Wait.Seconds())))
	}
	for _, b := range w.warnings[res.Node] {
		span.AddEvent("kewplan.budget.warning", trace.WithTimestamp(b.Time), trace.WithAttributes(
			e.str("kewplan.budget.cap", b.Cap), attribute.Float64("kewplan.budget.limit", b.Limit),
			attribute.Float64("kewplan.budget.value", b.Value), attribute.Float64("kewplan.budget.warn_at", b.WarnAt)))
	}
	for _, d := range w.denials[res.Node] {
		span.AddEvent("egress.denied", trace.WithTimestamp(d.Time), e.denialEvent(d))
	}
	if !ledger.NodeSucceeded(res.Status) && res.Status != ledger.StatusReused {
		span.SetStatus(codes.Error, res.Status)
	}
	span.End(trace.WithTimestamp(end))
	e.inst.node(e, &res, len(attempts))
	w.done[res.Node] = true
	delete(w.retries, res.Node)
	delete(w.warnings, res.Node)
	delete(w.phases, res.Node)
	delete(w.denials, res.Node)
}

// nodeAttrs are a node's span attributes: what ran, how it ended, what it cost by the agent's own meter. No prompt,
// no output, no free-text reason: a reason may quote the agent.
func (e *Exporter) nodeAttrs(res *ledger.NodeResult) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		e.str("kewplan.node", res.Node), e.str("kewplan.runner", res.Runner), e.str("kewplan.role", res.Role),
		e.str("container.image.name", res.Image), e.str("gen_ai.request.model", res.Model),
		e.str("kewplan.node.status", res.Status), attribute.Int("kewplan.attempts", res.Attempts),
		attribute.Int64("gen_ai.usage.input_tokens", res.Totals.InputTokens),
		attribute.Int64("gen_ai.usage.output_tokens", res.Totals.OutputTokens),
		attribute.Int64("kewplan.usage.cache_read_tokens", res.Totals.CacheReadTokens),
		attribute.Int64("kewplan.usage.cache_write_tokens", res.Totals.CacheWriteTokens),
	}
	if res.ImageID != "" {
		attrs = append(attrs, e.str("container.image.id", res.ImageID))
	}
	if res.Totals.Model != "" {
		attrs = append(attrs, e.str("gen_ai.response.model", res.Totals.Model))
	}
	if res.ExitCode != nil {
		attrs = append(attrs, attribute.Int64("kewplan.exit_code", *res.ExitCode))
	}
	if cost, src := res.RecordedCost(); cost != nil {
		attrs = append(attrs, attribute.Float64("kewplan.cost.usd", *cost), e.str("kewplan.cost.source", src))
	}
	if res.Verdict != nil {
		attrs = append(attrs, e.str("kewplan.verdict", res.Verdict.Verdict),
			attribute.Int("kewplan.verdict.findings", len(res.Verdict.Findings)), e.str("kewplan.verdict.sha256", res.Verdict.SHA256))
	}
	if res.Budget != nil {
		attrs = append(attrs, e.str("kewplan.budget.stop", res.Budget.Cap), e.str("kewplan.budget.scope", res.Budget.Scope))
	}
	if res.Commit != "" {
		attrs = append(attrs, e.str("vcs.ref.head.revision", res.Commit), attribute.Bool("kewplan.pushed", res.Pushed))
	}
	if res.ReusedFrom != "" {
		attrs = append(attrs, e.str("kewplan.reused_from", res.ReusedFrom))
	}
	return attrs
}

func (e *Exporter) attemptSpan(ctx context.Context, res *ledger.NodeResult, a ledger.AttemptRecord) {
	var start, end time.Time
	if a.StartedAt != nil {
		start = *a.StartedAt
	}
	if a.EndedAt != nil {
		end = *a.EndedAt
	}
	if start.IsZero() {
		start = end
	}
	if end.IsZero() || end.Before(start) {
		end = start
	}
	attrs := []attribute.KeyValue{
		e.str("kewplan.node", res.Node), attribute.Int("kewplan.attempt", a.Attempt), e.str("kewplan.attempt.status", a.Status),
		attribute.Int64("gen_ai.usage.input_tokens", a.InputTokens), attribute.Int64("gen_ai.usage.output_tokens", a.OutputTokens),
		attribute.Int64("kewplan.usage.cache_read_tokens", a.CacheReadTokens), attribute.Int64("kewplan.usage.cache_write_tokens", a.CacheWriteTokens),
		e.str("kewplan.meter", "agent"),
	}
	if a.ExitCode != nil {
		attrs = append(attrs, attribute.Int64("kewplan.exit_code", *a.ExitCode))
	}
	if a.StopClass != "" {
		attrs = append(attrs, e.str("kewplan.attempt.stop_class", a.StopClass))
	}
	if a.RetryWait > 0 {
		attrs = append(attrs, attribute.Float64("kewplan.retry.wait_s", a.RetryWait.Seconds()))
	}
	if a.CostUSD != nil {
		attrs = append(attrs, attribute.Float64("kewplan.cost.usd", *a.CostUSD))
	}
	actx, span := e.tracer.Start(ctx, fmt.Sprintf("attempt %d", a.Attempt),
		trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	for _, p := range e.w.phases[res.Node] {
		if p.Attempt != a.Attempt {
			continue
		}
		_, ps := e.tracer.Start(actx, e.mask(p.Phase), trace.WithTimestamp(p.Start), trace.WithAttributes(
			e.str("kewplan.node", res.Node), attribute.Int("kewplan.attempt", a.Attempt)))
		ps.End(trace.WithTimestamp(p.End))
	}
	if a.Status != ledger.StatusSucceeded && !ledger.NodeSucceeded(a.Status) {
		span.SetStatus(codes.Error, a.Status)
	}
	if e.w.attempts[res.Node] == nil {
		e.w.attempts[res.Node] = map[int]trace.SpanContext{}
	}
	e.w.attempts[res.Node][a.Attempt] = span.SpanContext()
	span.End(trace.WithTimestamp(end))
}

// applyDone sends the brokered model calls under their attempts, the denials that came late, and ends the apply.
func (e *Exporter) applyDone(sum executor.ApplySummary) {
	w := &e.w
	if w.root == nil { // no ApplyStart: nothing was opened
		return
	}
	if l := e.openLedger(); l != nil {
		reqs, err := l.BrokerRequests(w.runID)
		if err != nil {
			e.warnLater("OpenTelemetry export: " + e.mask(err.Error()))
		}
		for _, r := range reqs {
			e.modelCallSpan(r)
		}
		_ = l.Close()
		w.ledger = nil
	}
	for _, d := range w.late {
		w.root.AddEvent("egress.denied", trace.WithTimestamp(d.Time), e.denialEvent(d))
	}
	for _, d := range w.denials { // nodes that never ended (a cancelled apply)
		for _, dd := range d {
			w.root.AddEvent("egress.denied", trace.WithTimestamp(dd.Time), e.denialEvent(dd))
		}
	}
	attrs := []attribute.KeyValue{
		e.str("kewplan.run.status", sum.Status),
		attribute.Int64("gen_ai.usage.input_tokens", sum.InputTokens), attribute.Int64("gen_ai.usage.output_tokens", sum.OutputTokens),
		attribute.Int("kewplan.egress.denied", sum.EgressDeniedTotal),
	}
	if sum.CostUSD != nil {
		attrs = append(attrs, attribute.Float64("kewplan.cost.usd", *sum.CostUSD), e.str("kewplan.cost.source", sum.CostSource))
	}
	if sum.BudgetStop != nil {
		attrs = append(attrs, e.str("kewplan.budget.stop", sum.BudgetStop.Cap), e.str("kewplan.budget.scope", sum.BudgetStop.Scope))
		e.inst.budgetStop(e, "", sum.BudgetStop)
	}
	w.root.SetAttributes(attrs...)
	if sum.Status != ledger.RunSucceeded {
		w.root.SetStatus(codes.Error, sum.Status)
	}
	end := sum.Ended
	if end.IsZero() {
		end = time.Now()
	}
	w.root.End(trace.WithTimestamp(end))
}

// modelCallSpan is one brokered request as the GenAI conventions name a client call, with the proxy's meter.
func (e *Exporter) modelCallSpan(r ledger.BrokerRequest) {
	w := &e.w
	parent, ok := w.attempts[r.Node][r.Attempt]
	if !ok {
		parent, ok = w.nodeSpan[r.Node]
	}
	ctx := w.rootCtx
	if ok {
		ctx = trace.ContextWithSpanContext(context.Background(), parent)
	}
	end := r.Time
	start := end.Add(-time.Duration(r.DurationMS) * time.Millisecond)
	name := r.Method + " " + r.Path
	attrs := []attribute.KeyValue{
		e.str("kewplan.node", r.Node), attribute.Int("kewplan.attempt", r.Attempt),
		e.str("http.request.method", r.Method), e.str("url.path", r.Path), e.str("server.address", r.Host),
		attribute.Int("http.response.status_code", r.Status), e.str("kewplan.credential", r.Credential),
		attribute.Int64("kewplan.bytes_in", r.BytesIn), attribute.Int64("kewplan.bytes_out", r.BytesOut),
	}
	if r.FirstByteMS != nil {
		// The time to the answer's first byte, as the proxy saw it (the GenAI conventions' time to first token is
		// a metric of the server's; this is the client's view of one call).
		attrs = append(attrs, attribute.Int64("kewplan.time_to_first_byte_ms", *r.FirstByteMS))
	}
	if r.ModelCall {
		model := r.Model
		if model == "" {
			model = w.model[r.Node]
		}
		name = "chat " + model
		attrs = append(attrs, e.str("gen_ai.operation.name", "chat"), e.str("gen_ai.request.model", w.model[r.Node]),
			e.str("gen_ai.response.model", r.Model), e.str("kewplan.meter", "proxy"), attribute.Bool("kewplan.metered", r.Metered),
			attribute.Int64("gen_ai.usage.input_tokens", r.InputTokens), attribute.Int64("gen_ai.usage.output_tokens", r.OutputTokens),
			attribute.Int64("kewplan.usage.cache_read_tokens", r.CacheReadTokens), attribute.Int64("kewplan.usage.cache_write_tokens", r.CacheWriteTokens),
			e.str("kewplan.cost.source", r.CostSource), attribute.Bool("kewplan.unsettled", r.Unsettled))
		if r.CostUSD != nil {
			attrs = append(attrs, attribute.Float64("kewplan.cost.usd", *r.CostUSD))
		}
		if r.BudgetCap != "" {
			attrs = append(attrs, e.str("kewplan.budget.refused_at", r.BudgetCap))
		}
	}
	_, span := e.tracer.Start(ctx, e.mask(name), trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	if r.Status >= 400 || r.Status == 0 {
		span.SetStatus(codes.Error, fmt.Sprintf("HTTP %d", r.Status))
	}
	span.End(trace.WithTimestamp(end))
	e.inst.modelCall(e, r, w.runner[r.Node], w.model[r.Node])
}
