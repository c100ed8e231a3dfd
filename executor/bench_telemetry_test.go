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
	runs := 0
	for b.Loop() {
		exp, err := telemetry.New(ctx, telemetry.Options{Getenv: os.Getenv, Secrets: []string{key}, Warn: func(s string) { b.Errorf("warning: %s", s) }})
		if err != nil {
			b.Fatal(err)
		}
		if runs%2 == 0 {
			off += apply()
			on += apply(exp)
		} else {
			on += apply(exp)
			off += apply()
		}
		exp.Close()
		runs++
	}
	b.ReportMetric(float64(on)/float64(off), "on/off")
	b.ReportMetric(off.Seconds()/float64(runs), "off-s")
	b.ReportMetric(on.Seconds()/float64(runs), "on-s")
}
