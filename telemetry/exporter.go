package telemetry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/kewplan/kewplan/executor"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/internal/redact"
)

// Exporter is an executor.Hook (and executor.SecretHook) that exports the apply it hears of. Its hook methods only
// queue what they are told (a bounded queue: past it an event is dropped and counted); one goroutine reads the
// ledger for each finished node and makes its spans and measurements, which the SDK's batch processor and periodic
// reader send in the background. ApplyDone waits, at most the flush timeout, for the last of them to leave.
type Exporter struct {
	executor.NilHook
	opts   Options
	tp     *sdktrace.TracerProvider
	mp     *sdkmetric.MeterProvider
	tracer trace.Tracer
	inst   *instruments
	errs   *exportErrors

	mu      sync.Mutex
	pending []string // the worker's warnings, said at the end from the hook's goroutine
	secrets []string
	masker  *redact.Masker // nil when secrets changed since it was built

	queue    chan func()
	dropped  atomic.Int64
	worker   sync.WaitGroup
	shutOnce sync.Once
	closed   atomic.Bool

	w workerState // only the worker goroutine touches it
}

// New starts an exporter for one apply. It connects to nothing yet (the OTLP exporters dial lazily), so an
// unreachable collector is never an error here; a protocol kewplan does not speak, or a malformed resource
// variable, is.
func New(ctx context.Context, opts Options) (*Exporter, error) {
	if opts.Getenv == nil {
		return nil, errors.New("telemetry: Options.Getenv is required")
	}
	if opts.FlushTimeout <= 0 {
		opts.FlushTimeout = DefaultFlushTimeout
	}
	traceProto, err := protocol(opts.Getenv, "TRACES")
	if err != nil {
		return nil, err
	}
	metricProto, err := protocol(opts.Getenv, "METRICS")
	if err != nil {
		return nil, err
	}
	res, err := newResource(ctx, opts.Version)
	if err != nil {
		return nil, err
	}
	// The SDK reports export failures to the global handler, which by default logs them to stderr; kewplan hears
	// of them through its own exporters' errors instead, and warns once at the end.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {}))
	errs := &exportErrors{}
	se, err := newSpanExporter(ctx, traceProto)
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	me, err := newMetricExporter(ctx, metricProto)
	if err != nil {
		_ = se.Shutdown(ctx)
		return nil, fmt.Errorf("OTLP metric exporter: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithBatcher(&spanExporter{SpanExporter: se, errs: errs},
			sdktrace.WithMaxQueueSize(maxSpanQueue), sdktrace.WithBatchTimeout(batchTimeout)),
	)
	mp := sdkmetric.NewMeterProvider(
		sdkmetric.WithResource(res),
		sdkmetric.WithReader(sdkmetric.NewPeriodicReader(&metricExporter{Exporter: me, errs: errs}, sdkmetric.WithInterval(metricPeriod))),
	)
	e := &Exporter{
		opts: opts, tp: tp, mp: mp, errs: errs,
		tracer:  tp.Tracer("github.com/kewplan/kewplan/telemetry"),
		secrets: maskable(opts.Secrets),
		queue:   make(chan func(), maxEventQueue),
	}
	e.inst, err = newInstruments(mp.Meter("github.com/kewplan/kewplan/telemetry"))
	if err != nil {
		_ = tp.Shutdown(ctx)
		_ = mp.Shutdown(ctx)
		return nil, err
	}
	e.w.init()
	e.worker.Add(1)
	go e.work()
	return e, nil
}

var (
	_ executor.SecretHook = (*Exporter)(nil)
	_ executor.PhaseHook  = (*Exporter)(nil)
)

func (e *Exporter) work() {
	defer e.worker.Done()
	for fn := range e.queue {
		fn()
	}
}

// enqueue hands fn to the worker, or drops it (counted) when the queue is full or the exporter closed.
func (e *Exporter) enqueue(fn func()) {
	if e.closed.Load() {
		return
	}
	select {
	case e.queue <- fn:
	default:
		e.dropped.Add(1)
	}
}

// minSecretBytes is the shortest value masked, as apply masks: a shorter one is no secret worth the name, and
// masking it would rewrite ordinary text.
const minSecretBytes = 6

func maskable(secrets []string) []string {
	var out []string
	for _, s := range secrets {
		if len(s) >= minSecretBytes {
			out = append(out, s)
		}
	}
	return out
}

// warnLater keeps a warning of the worker's for the end of the run: the worker runs beside the apply's hook calls,
// and a view hears from one goroutine at a time.
func (e *Exporter) warnLater(msg string) {
	e.mu.Lock()
	e.pending = append(e.pending, msg)
	e.mu.Unlock()
}

// mask is the masker of every secret known so far.
func (e *Exporter) mask(s string) string {
	e.mu.Lock()
	if e.masker == nil {
		e.masker = redact.New(e.secrets...)
	}
	m := e.masker
	e.mu.Unlock()
	return m.String(s)
}

// RunSecret adds a value the engine registered as the run's secret to what is masked.
func (e *Exporter) RunSecret(v string) {
	if len(v) < minSecretBytes {
		return
	}
	e.mu.Lock()
	e.secrets = append(e.secrets, v)
	e.masker = nil
	e.mu.Unlock()
}

// ApplyStart opens the apply's trace.
func (e *Exporter) ApplyStart(ev executor.ApplyStartEvent) {
	e.enqueue(func() { e.applyStart(ev) })
}

// NodeStart remembers when the node started.
func (e *Exporter) NodeStart(ev executor.NodeStartEvent) {
	e.enqueue(func() { e.w.started[ev.Node] = ev.Time })
}

// NodePhase is kept for the attempt's span, as a child span.
func (e *Exporter) NodePhase(ev executor.NodePhaseEvent) {
	e.enqueue(func() { e.w.phases[ev.Node] = append(e.w.phases[ev.Node], ev) })
}

// NodeRetry is kept for the node's span, as an event.
func (e *Exporter) NodeRetry(ev executor.NodeRetryEvent) {
	e.enqueue(func() { e.w.retries[ev.Node] = append(e.w.retries[ev.Node], ev) })
}

// BudgetWarning is kept for the node's span, as an event.
func (e *Exporter) BudgetWarning(ev executor.BudgetWarningEvent) {
	e.enqueue(func() { e.w.warnings[ev.Node] = append(e.w.warnings[ev.Node], ev) })
}

// EgressDenied is kept for the node's span (or the apply's, once the node's span is sent) and counted.
func (e *Exporter) EgressDenied(d ledger.EgressDenial) {
	e.enqueue(func() { e.egressDenied(d) })
}

// NodeDone exports the node: its span, its attempts' spans and its measurements.
func (e *Exporter) NodeDone(res ledger.NodeResult) {
	e.enqueue(func() { e.nodeDone(res) })
}

// ApplyDone exports the brokered model calls and closes the apply's trace, then flushes everything to the
// collector, waiting at most the flush timeout; what did not leave by then is warned of.
func (e *Exporter) ApplyDone(sum executor.ApplySummary) {
	deadline := time.Now().Add(e.flushTimeout())
	finished := make(chan struct{})
	select {
	case e.queue <- func() { e.applyDone(sum); close(finished) }:
	case <-time.After(time.Until(deadline)):
		close(finished)
	}
	select {
	case <-finished:
	case <-time.After(time.Until(deadline)):
	}
	e.shutdown(deadline)
}

// Close shuts the exporter down if ApplyDone did not (an apply that never started); it is safe to call twice.
func (e *Exporter) Close() {
	e.shutdown(time.Now().Add(e.flushTimeout()))
}

// flushTimeout is the wait for the collector at the end: short once an export already failed.
func (e *Exporter) flushTimeout() time.Duration {
	if e.errs.failed() {
		return shortFlush
	}
	return e.opts.FlushTimeout
}

func (e *Exporter) shutdown(deadline time.Time) {
	e.shutOnce.Do(func() {
		e.closed.Store(true)
		close(e.queue)
		workerDone := make(chan struct{})
		go func() { e.worker.Wait(); close(workerDone) }()
		select {
		case <-workerDone:
		case <-time.After(time.Until(deadline)):
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		terr := e.tp.Shutdown(ctx)
		merr := e.mp.Shutdown(ctx)
		e.warnOutcome(errors.Join(terr, merr))
	})
}

// warnOutcome says, once, what the collector did not get.
func (e *Exporter) warnOutcome(shutdownErr error) {
	if e.opts.Warn == nil {
		return
	}
	e.mu.Lock()
	pending := e.pending
	e.pending = nil
	e.mu.Unlock()
	for _, w := range pending {
		e.opts.Warn(w)
	}
	if n := e.dropped.Load(); n > 0 {
		e.opts.Warn(fmt.Sprintf("OpenTelemetry export: %d events of the run were dropped because the export queue was full; the trace is incomplete", n))
	}
	first, spans, metrics := e.errs.summary()
	if first == nil && shutdownErr != nil {
		first = shutdownErr
	}
	if first == nil {
		return
	}
	msg := fmt.Sprintf("OpenTelemetry export failed (%s)", e.mask(first.Error()))
	if spans > 0 || metrics > 0 {
		msg += fmt.Sprintf(": %d spans and %d metric exports did not reach the collector", spans, metrics)
	}
	e.opts.Warn(msg + "; the apply itself is unaffected. Check OTEL_EXPORTER_OTLP_ENDPOINT and that the collector is running.")
}

// exportErrors counts what the OTLP exporters failed to send.
type exportErrors struct {
	mu      sync.Mutex
	first   error
	spans   int
	metrics int
}

func (x *exportErrors) record(err error, spans, metrics int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.first == nil {
		x.first = err
	}
	x.spans += spans
	x.metrics += metrics
}

func (x *exportErrors) failed() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.first != nil
}

func (x *exportErrors) summary() (error, int, int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.first, x.spans, x.metrics
}

// spanExporter and metricExporter are the OTLP exporters with their failures counted.
type spanExporter struct {
	sdktrace.SpanExporter
	errs *exportErrors
}

func (s *spanExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := s.SpanExporter.ExportSpans(ctx, spans)
	if err != nil {
		s.errs.record(err, len(spans), 0)
	}
	return err
}

type metricExporter struct {
	sdkmetric.Exporter
	errs *exportErrors
}

func (m *metricExporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	err := m.Exporter.Export(ctx, rm)
	if err != nil {
		m.errs.record(err, 0, 1)
	}
	return err
}
