package kubernetes_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kewplan/kewplan/executor"
	"github.com/kewplan/kewplan/executor/ledger"
)

// countingTransport counts the requests kewplan's client sends to the API server.
type countingTransport struct {
	next http.RoundTripper
	n    *atomic.Int64
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkNodeFanOut50: a for_each fan-out of 50 reviewers on the test node, each a Job whose pod clones through
// kewplan's egress proxy, runs the fake agent and reports its verdict, run to the end with --parallelism 4. It
// reports the wall time, kewplan's API requests per node (every request of its clients: applies, watches, logs,
// deletes) and this process's CPU per node (kewplan's apply loop, its client and the test's git server; not the
// cluster's).
func BenchmarkNodeFanOut50(b *testing.B) {
	const nodes = 50
	e := env(b)
	var requests atomic.Int64
	e.wrap = func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt, &requests} }
	defer func() { e.wrap = nil }()
	keys := make([]string, nodes)
	for i := range keys {
		keys[i] = fmt.Sprintf("%q", fmt.Sprintf("r%02d", i))
	}
	for b.Loop() {
		ns := e.namespace(b, nil)
		repo, _ := e.repo(b)
		src := strings.Replace(e.config(ns, repo, `
node "fan" {
  for_each = toset([`+strings.Join(keys, ", ")+`])
  runner   = "claude-code"
  role     = "reviewer"
  model    = "claude-sonnet-4-5"
  repo     = "REPO"
  ref      = "main"
  prompt   = "mode=verdict\nverdict=approve\nReview part ${each.key}."
  timeout  = "10m"
}
`), `cpus    = "1"`, `cpus    = "0.25"`, 1)
		requests.Store(0)
		cpu0, start := cpuTime(), time.Now()
		a := e.apply(b, nodeCtx(b, 30*time.Minute), ns, src, func(o *executor.ApplyOptions) { o.Parallelism = 4 })
		wall, cpu := time.Since(start), cpuTime()-cpu0
		if a.err != nil {
			b.Fatal(a.err)
		}
		approved := 0
		for _, n := range a.sum.Nodes {
			if n.Status == ledger.StatusApproved {
				approved++
			} else {
				b.Errorf("%s: %s (%s)", n.Node, n.Status, n.Reason)
			}
		}
		if approved != nodes {
			b.Fatalf("%d of %d nodes approved", approved, nodes)
		}
		b.ReportMetric(wall.Seconds(), "wall-s")
		b.ReportMetric(float64(requests.Load())/nodes, "api-requests/node")
		b.ReportMetric(float64(cpu.Milliseconds())/nodes, "cpu-ms/node")
	}
}
