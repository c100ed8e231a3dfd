package executor_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kewplan/kewplan/executor"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/internal/testtools/collector"
	"github.com/kewplan/kewplan/telemetry"
)

// BenchmarkApplyTelemetryOverhead applies the same 32 nodes with OpenTelemetry export off and on (to a real
// collector over OTLP/HTTP), alternating, and reports the ratio of their wall times in one run (on/off; the
// bound is 1.05) with each mean. A first apply, not measured, warms the proxy's image and the engine's caches.
func BenchmarkApplyTelemetryOverhead(b *testing.B) {
	collector.Need(b)
	f := executor.NewTestFixture(b)
	col := collector.Start(b)
	var nodes strings.Builder
	for i := range 32 {
		fmt.Fprintf(&nodes, "node \"%%[1]sn%02d\" {\n  runner = \"claude-code\"\n  model  = \"claude-sonnet-4-5\"\n  repo   = %%[2]q\n  role   = \"reviewer\"\n  prompt = \"mode=verdict\\nverdict=approve\"\n}\n", i)
	}
	cfg := f.Config(nodes.String())
	b.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.HTTPEndpoint)
	key := executor.FakeAPIKey()
	ctx := context.Background()
	apply := func(hooks ...executor.Hook) time.Duration {
		start := time.Now()
		sum, _, err := f.ApplyBrokered(ctx, cfg, key, hooks...)
		d := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if sum.Status != ledger.RunSucceeded {
			for _, n := range sum.Nodes {
				if n.Status != ledger.StatusApproved {
					b.Fatalf("apply %s: node %s %s: %s", sum.Status, n.Node, n.Status, n.Reason)
				}
			}
			b.Fatalf("apply %s", sum.Status)
		}
		return d
	}
	apply() // warm: the egress proxy's image and the engine's caches, outside the measurement
	var off, on time.Duration
	var inHooks time.Duration // time the apply spent inside the exporter's hook methods, flush included
	runs := 0
	for b.Loop() {
		exp, err := telemetry.New(ctx, telemetry.Options{Getenv: os.Getenv, Secrets: []string{key}, Warn: func(s string) { b.Errorf("warning: %s", s) }})
		if err != nil {
			b.Fatal(err)
		}
		th := &timedHook{exp: exp, d: &inHooks}
		if runs%2 == 0 {
			off += apply()
			on += apply(th)
		} else {
			on += apply(th)
			off += apply()
		}
		exp.Close()
		runs++
	}
	b.ReportMetric(float64(on)/float64(off), "on/off")
	b.ReportMetric(off.Seconds()/float64(runs), "off-s")
	b.ReportMetric(on.Seconds()/float64(runs), "on-s")
	b.ReportMetric(float64(inHooks.Milliseconds())/float64(runs), "in-exporter-ms")
}

// timedHook adds up the time spent in the exporter's hook methods (ApplyDone's flush included).
type timedHook struct {
	exp *telemetry.Exporter
	d   *time.Duration
}

func (h *timedHook) time(fn func()) {
	start := time.Now()
	fn()
	*h.d += time.Since(start)
}

func (h *timedHook) ApplyStart(e executor.ApplyStartEvent) { h.time(func() { h.exp.ApplyStart(e) }) }
func (h *timedHook) NodeStart(e executor.NodeStartEvent)   { h.time(func() { h.exp.NodeStart(e) }) }
func (h *timedHook) NodeProgress(e executor.NodeProgressEvent) {
	h.time(func() { h.exp.NodeProgress(e) })
}
func (h *timedHook) NodeDone(e ledger.NodeResult)        { h.time(func() { h.exp.NodeDone(e) }) }
func (h *timedHook) NodeRetry(e executor.NodeRetryEvent) { h.time(func() { h.exp.NodeRetry(e) }) }
func (h *timedHook) Warning(e executor.WarningEvent)     { h.time(func() { h.exp.Warning(e) }) }
func (h *timedHook) BudgetWarning(e executor.BudgetWarningEvent) {
	h.time(func() { h.exp.BudgetWarning(e) })
}
func (h *timedHook) EgressDenied(e ledger.EgressDenial)  { h.time(func() { h.exp.EgressDenied(e) }) }
func (h *timedHook) ApplyDone(e executor.ApplySummary)   { h.time(func() { h.exp.ApplyDone(e) }) }
func (h *timedHook) RunSecret(v string)                  { h.time(func() { h.exp.RunSecret(v) }) }
func (h *timedHook) NodePhase(e executor.NodePhaseEvent) { h.time(func() { h.exp.NodePhase(e) }) }
