package executor

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kewplan/kewplan/executor/ledger"
)

// BenchmarkApplyEgressOverhead measures what the egress proxy costs an apply, per node: the same N reviewer nodes
// (KEWPLAN_BENCH_NODES, default 4) applied serially with their model endpoint allowed (apply builds nothing once
// the proxy image exists, then starts, probes and removes one proxy) and with no egress host at all (no proxy).
// A benchmark, not a threshold: `make bench-apply` reports egress-overhead-ms/node (the goal: under 100).
func BenchmarkApplyEgressOverhead(b *testing.B) {
	n := 4
	if s := os.Getenv("KEWPLAN_BENCH_NODES"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			b.Fatalf("KEWPLAN_BENCH_NODES=%q is not a positive number", s)
		}
		n = v
	}
	f := newFixture(b)
	newEgressWorldTB(b, f)
	nodes := func(runnerBlock string) string {
		var src strings.Builder
		src.WriteString(runnerBlock)
		for i := 0; i < n; i++ {
			fmt.Fprintf(&src, "\nnode \"%%[1]sn%02d\" {\n  runner = \"claude-code\"\n  role   = \"reviewer\"\n  model  = \"claude-sonnet-4-5\"\n  repo   = %%[2]q\n  prompt = \"mode=verdict\"\n}\n", i)
		}
		return src.String()
	}
	withEgress := f.config(nodes(""))
	withoutEgress := f.config(nodes("runner \"claude-code\" {\n  endpoints = []\n}\n"))
	if np := f.plan(withoutEgress).Nodes[0]; np.Container == nil || np.Container.Proxied {
		b.Fatal("the configuration without egress still plans a proxied node")
	}
	ctx := context.Background()
	run := func(cfg any) time.Duration {
		start := time.Now()
		sum, _, err := f.apply(ctx, withEgress, func(o *ApplyOptions) {
			o.Parallelism, o.Hooks = 1, nil
			if cfg != nil {
				o.Config, o.Plan = withoutEgress, f.plan(withoutEgress)
			}
		})
		if err != nil {
			b.Fatal(err)
		}
		if sum.Status != ledger.RunSucceeded {
			b.Fatalf("apply: %s: %+v", sum.Status, sum.Nodes[0])
		}
		return time.Since(start)
	}
	run(nil) // builds the proxy image once, outside the measurement
	var with, without time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		with += run(nil)
		without += run(true)
	}
	b.StopTimer()
	perNode := func(d time.Duration) float64 { return float64(d.Milliseconds()) / float64(b.N*n) }
	b.ReportMetric(perNode(with), "egress-ms/node")
	b.ReportMetric(perNode(without), "no-egress-ms/node")
	b.ReportMetric(perNode(with)-perNode(without), "egress-overhead-ms/node")
	b.Logf("%d nodes, serial: with egress %.0f ms/node, without %.0f ms/node, overhead %+.0f ms/node",
		n, perNode(with), perNode(without), perNode(with)-perNode(without))
}
