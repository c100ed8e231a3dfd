package planner_test

import (
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/internal/testtools/benchplan"
	"github.com/kewplan/kewplan/planner"
)

// writeGeneratedConfig writes benchplan's configuration of n containers of the given shape (chain, fanout,
// foreach) to dir/main.hcl.
func writeGeneratedConfig(tb testing.TB, dir, shape string, n int) {
	tb.Helper()
	if err := benchplan.Write(dir, shape, n); err != nil {
		tb.Fatal(err)
	}
}

func loadGenerated(tb testing.TB, shape string, n int) (*config.Config, planner.Inputs) {
	tb.Helper()
	dir := tb.TempDir()
	writeGeneratedConfig(tb, dir, shape, n)
	cfg, diags := config.Load(dir)
	if diags.HasErrors() {
		tb.Fatalf("config.Load: %s", diags.Error())
	}
	vars, diags := cfg.ResolveVariables(config.VariableInputs{})
	if diags.HasErrors() {
		tb.Fatalf("ResolveVariables: %s", diags.Error())
	}
	return cfg, planner.Inputs{Vars: vars, FS: config.DirFS(cfg.Dir)}
}

// BenchmarkBuild plans generated configurations and reports time, allocations and bytes per node, so growth
// that is not linear shows up as a per-node figure rising with size.
func BenchmarkBuild(b *testing.B) {
	for _, shape := range []string{"chain", "fanout", "foreach"} {
		for _, n := range []int{100, 1000, 10000} {
			b.Run(fmt.Sprintf("%s-%d", shape, n), func(b *testing.B) {
				cfg, in := loadGenerated(b, shape, n)
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				cpu0 := processCPU()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					p, _ := planner.Build(cfg, in)
					if p.HasErrors() || len(p.Nodes) != n {
						b.Fatalf("plan of %d nodes: %d nodes, errors: %v", n, len(p.Nodes), p.Diagnostics.Error())
					}
				}
				b.StopTimer()
				cpu := processCPU() - cpu0
				runtime.ReadMemStats(&after)
				perNode := float64(b.N) * float64(n)
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/perNode, "ns/node")
				// CPU time (user+system, GC included) is what a loaded, shared machine does not distort.
				b.ReportMetric(float64(cpu.Nanoseconds())/perNode, "cpu-ns/node")
				b.ReportMetric(float64(after.Mallocs-before.Mallocs)/perNode, "allocs/node")
				b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/perNode, "B/node")
			})
		}
	}
}

// processCPU is the process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkLoadAndBuild is what `kewplan plan` does for 10,000 nodes: parse, decode, resolve, plan.
//
// "foreach" is 100 nodes × for_each over 100 keys: the same 10,000 containers, planned as instances.
func BenchmarkLoadAndBuild(b *testing.B) {
	for _, shape := range []string{"chain", "fanout", "foreach"} {
		b.Run(shape+"-10000", func(b *testing.B) {
			dir := b.TempDir()
			writeGeneratedConfig(b, dir, shape, 10000)
			cpu0 := processCPU()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				cfg, diags := config.Load(dir)
				if diags.HasErrors() {
					b.Fatal(diags.Error())
				}
				vars, _ := cfg.ResolveVariables(config.VariableInputs{})
				p, _ := planner.Build(cfg, planner.Inputs{Vars: vars, FS: config.DirFS(cfg.Dir)})
				if p.HasErrors() {
					b.Fatal(p.Diagnostics.Error())
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/10000, "ns/node")
			b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N)/10000, "cpu-ns/node")
		})
	}
}

// TestGeneratedPlans checks the benchmark's configurations plan cleanly and in dependency order, so the
// benchmark measures real work.
func TestGeneratedPlans(t *testing.T) {
	for _, shape := range []string{"chain", "fanout", "foreach"} {
		n := 50
		if shape == "foreach" {
			n = 300
		}
		cfg, in := loadGenerated(t, shape, n)
		p, diags := planner.Build(cfg, in)
		if diags.HasErrors() {
			t.Fatalf("%s: %s", shape, diags.Error())
		}
		if len(p.Nodes) != n {
			t.Errorf("%s: %d nodes planned, want %d", shape, len(p.Nodes), n)
		}
		pos := map[string]int{}
		for i, n := range p.Nodes {
			pos[n.Name] = i
		}
		for _, n := range p.Nodes {
			if shape == "foreach" && n.Block != "f000" && len(n.DependsOn) != 1 {
				t.Errorf("%s: %s depends on %v, want the one instance of the same key", shape, n.Name, n.DependsOn)
			}
			for _, d := range n.DependsOn {
				if pos[d] >= pos[n.Name] {
					t.Errorf("%s: %s planned before its dependency %s", shape, n.Name, d)
				}
			}
		}
	}
}
