package executor

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/planner"
)

// BenchmarkApplyVsDockerRun measures what apply adds per node (clone, prompt file, ledger, attach and metering,
// verdict collection, cleanup) over the bare container runs: the same N trivial containers run by a shell loop
// of `docker run` with the planned argv, then by apply serially, then by apply with parallelism 4.
// KEWPLAN_BENCH_NODES sets N (default 8). `make bench-apply` runs it once.
func BenchmarkApplyVsDockerRun(b *testing.B) {
	if _, err := exec.LookPath("docker"); err != nil {
		b.Skip("the docker CLI is not installed")
	}
	n := 8
	if s := os.Getenv("KEWPLAN_BENCH_NODES"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			b.Fatalf("KEWPLAN_BENCH_NODES=%q is not a positive number", s)
		}
		n = v
	}
	f := newFixture(b)
	var src strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&src, `
node "%%[1]sn%02d" {
  runner = "claude-code"
  role   = "reviewer"
  model  = "claude-sonnet-4-5"
  repo   = %%[2]q
  prompt = "mode=verdict"
}
`, i)
	}
	cfg := f.config(src.String())
	plan := f.plan(cfg)
	ctx := context.Background()
	env := append(os.Environ(), "ANTHROPIC_API_KEY=sk-bench-dummy")

	var shell, shell4, serial, par4 time.Duration
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		// The raw loops: checkouts prepared beforehand (not timed), then `docker run` with the planned argv, one
		// after another and then four at a time, as a shell script with xargs -P 4 would.
		b.StopTimer()
		serialRuns := dockerRunArgvs(b, plan, fmt.Sprintf("bench-shell-%d", it))
		parallelRuns := dockerRunArgvs(b, plan, fmt.Sprintf("bench-shell4-%d", it))
		b.StartTimer()
		shell += runDockerLoop(b, ctx, env, serialRuns, 1)
		shell4 += runDockerLoop(b, ctx, env, parallelRuns, 4)

		for _, par := range []int{1, 4} {
			start := time.Now()
			sum, _, err := f.apply(ctx, cfg, func(o *ApplyOptions) {
				o.Parallelism = par
				o.Environ = env
				o.Hook = NilHook{}
			})
			if err != nil {
				b.Fatal(err)
			}
			if sum.Status != ledger.RunSucceeded {
				b.Fatalf("apply: %s: %+v", sum.Status, sum.Nodes[0])
			}
			if par == 1 {
				serial += time.Since(start)
			} else {
				par4 += time.Since(start)
			}
		}
	}
	b.StopTimer()
	perNode := func(d time.Duration) float64 { return float64(d.Milliseconds()) / float64(b.N*n) }
	b.ReportMetric(perNode(shell), "shell-ms/node")
	b.ReportMetric(perNode(serial), "apply-ms/node")
	b.ReportMetric(perNode(serial)-perNode(shell), "overhead-ms/node")
	b.ReportMetric(float64(serial)/float64(shell), "serial/shell")
	b.ReportMetric(perNode(shell4), "shell4-ms/node")
	b.ReportMetric(perNode(par4), "par4-ms/node")
	b.ReportMetric(float64(par4)/float64(shell4), "par4/shell4")
	b.Logf("%d nodes: serial: docker run loop %.0f ms/node, apply %.0f ms/node (overhead %+.0f ms/node, goal ≤ +30); 4-way: docker run loop %.0f ms/node, apply --parallelism 4 %.0f ms/node (ratio %.2f, goal ≤ 1.10)",
		n, perNode(shell), perNode(serial), perNode(serial)-perNode(shell), perNode(shell4), perNode(par4), float64(par4)/float64(shell4))
}

// dockerRunArgvs prepares a checkout with its prompt file for every node of the plan and returns the `docker run`
// argv of each, as the plan shows it, with the container names made unique by tag.
func dockerRunArgvs(b *testing.B, plan *planner.Plan, tag string) [][]string {
	b.Helper()
	var out [][]string
	for _, np := range plan.Nodes {
		checkout := filepath.Join(b.TempDir(), "checkout")
		if err := os.MkdirAll(checkout, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(checkout, planner.PromptFilename), []byte(np.Prompt.Text), 0o644); err != nil {
			b.Fatal(err)
		}
		if err := makeWritableByAgent(checkout); err != nil {
			b.Fatal(err)
		}
		out = append(out, FillContainer(np.Container, tag, checkout).Argv())
	}
	return out
}

// runDockerLoop runs the argvs with at most par at once, each as its own `docker run` process, and returns the
// wall time of the whole loop.
func runDockerLoop(b *testing.B, ctx context.Context, env []string, argvs [][]string, par int) time.Duration {
	b.Helper()
	start := time.Now()
	jobs := make(chan []string)
	errs := make(chan error, len(argvs))
	var wg sync.WaitGroup
	for w := 0; w < par; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for argv := range jobs {
				cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
				cmd.Env = env
				if out, err := cmd.CombinedOutput(); err != nil {
					errs <- fmt.Errorf("%s: %v\n%s", planner.ShellJoin(argv), err, out)
				}
			}
		}()
	}
	for _, argv := range argvs {
		jobs <- argv
	}
	close(jobs)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return time.Since(start)
}

// BenchmarkApplyRunscVsRunc measures the per-node cost of the gVisor isolation tier: the same N trivial reviewer
// nodes applied serially on the engine's default runtime (runc) and with runtime = "runsc". The difference per
// node is what gVisor adds (sandbox start, the Sentry and gofer, teardown) to a node's wall time.
// KEWPLAN_BENCH_NODES sets N (default 8). `make bench-apply` runs it once.
func BenchmarkApplyRunscVsRunc(b *testing.B) {
	n := 8
	if s := os.Getenv("KEWPLAN_BENCH_NODES"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			b.Fatalf("KEWPLAN_BENCH_NODES=%q is not a positive number", s)
		}
		n = v
	}
	f := newFixture(b)
	requireRunsc(b, f.eng)
	nodes := func(runtime string) string {
		var src strings.Builder
		for i := 0; i < n; i++ {
			fmt.Fprintf(&src, `
node "%%[1]s%s%02d" {
  runner = "claude-code"
  role   = "reviewer"
  model  = "claude-sonnet-4-5"
  repo   = %%[2]q
  prompt = "mode=verdict"
%s}
`, strings.TrimPrefix(runtime+"-", "-"), i, map[bool]string{true: "  runtime = \"" + runtime + "\"\n"}[runtime != ""])
		}
		return src.String()
	}
	cfgs := map[string]*config.Config{"runc": f.config(nodes("")), "runsc": f.config(nodes("runsc"))}
	ctx := context.Background()
	took := map[string]time.Duration{}
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		for _, rt := range []string{"runc", "runsc"} {
			start := time.Now()
			sum, _, err := f.apply(ctx, cfgs[rt], func(o *ApplyOptions) {
				o.Parallelism = 1
				o.Hook = NilHook{}
			})
			if err != nil {
				b.Fatal(err)
			}
			if sum.Status != ledger.RunSucceeded {
				b.Fatalf("apply under %s: %s: %+v", rt, sum.Status, sum.Nodes[0])
			}
			took[rt] += time.Since(start)
		}
	}
	b.StopTimer()
	perNode := func(d time.Duration) float64 { return float64(d.Milliseconds()) / float64(b.N*n) }
	b.ReportMetric(perNode(took["runc"]), "runc-ms/node")
	b.ReportMetric(perNode(took["runsc"]), "runsc-ms/node")
	b.ReportMetric(perNode(took["runsc"])-perNode(took["runc"]), "runsc-extra-ms/node")
	b.ReportMetric(float64(took["runsc"])/float64(took["runc"]), "runsc/runc")
	b.Logf("%d nodes, serial apply: runc %.0f ms/node, runsc %.0f ms/node (%+.0f ms/node, ratio %.2f)",
		n, perNode(took["runc"]), perNode(took["runsc"]), perNode(took["runsc"])-perNode(took["runc"]), float64(took["runsc"])/float64(took["runc"]))
}
