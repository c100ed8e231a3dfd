package executor

import (
	"context"
	"encoding/json"
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
	"github.com/kewplan/kewplan/egress"
	"github.com/kewplan/kewplan/executor/checkout"
	"github.com/kewplan/kewplan/executor/docker"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/planner"
)

// BenchmarkApplyVsDockerRun measures what apply adds (clone, prompt file, ledger, attach and metering, verdict
// collection, cleanup, the egress proxy's readiness probe) over the bare container runs: the same containers run
// by a script — the egress proxy started with `docker run -d`, then the N trivial nodes with `docker run` and the
// planned argv, serially and four at a time, then `docker rm -f` of the proxy — then by apply serially and with
// --parallelism 4. The serial overhead is split into what an apply costs once (fixed-ms: the
// egress proxy's start and removal, the ledger, preflight) and what each further node adds (overhead-ms/node), from
// a second pair of runs with one node. Before the timed runs one apply builds the egress proxy's image, which
// happens once per kewplan binary. KEWPLAN_BENCH_NODES sets N (default 8). `make bench-apply` runs it once.
func BenchmarkApplyVsDockerRun(b *testing.B) {
	if _, err := exec.LookPath("docker"); err != nil {
		b.Skip("the docker CLI is not installed")
	}
	n := 8
	if s := os.Getenv("KEWPLAN_BENCH_NODES"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 2 {
			b.Fatalf("KEWPLAN_BENCH_NODES=%q is not a number of at least 2", s)
		}
		n = v
	}
	f := newFixture(b)
	node := func(name string) string {
		return fmt.Sprintf(`
node "%%[1]s%s" {
  runner = "claude-code"
  role   = "reviewer"
  model  = "claude-sonnet-4-5"
  repo   = %%[2]q
  prompt = "mode=verdict"
}
`, name)
	}
	var src strings.Builder
	for i := 0; i < n; i++ {
		src.WriteString(node(fmt.Sprintf("n%02d", i)))
	}
	cfg, cfg1 := f.config(src.String()), f.config(node("solo"))
	plan, plan1 := f.plan(cfg), f.plan(cfg1)
	ctx := context.Background()
	env := append(os.Environ(), "ANTHROPIC_API_KEY=sk-bench-dummy")
	apply := func(cfg *config.Config, par int) time.Duration {
		start := time.Now()
		sum, _, err := f.apply(ctx, cfg, func(o *ApplyOptions) {
			o.Parallelism = par
			o.Environ = env
			o.Hooks = nil
		})
		if err != nil {
			b.Fatal(err)
		}
		if sum.Status != ledger.RunSucceeded {
			b.Fatalf("apply: %s: %+v", sum.Status, sum.Nodes[0])
		}
		return time.Since(start)
	}
	apply(cfg1, 1) // the egress proxy's image, built once per binary

	var shell, shell4, shell1, serial, par4, serial1 time.Duration
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		// The raw loops: checkouts prepared beforehand (not timed), then `docker run` with the planned argv, one
		// after another and then four at a time, as a shell script with xargs -P 4 would.
		b.StopTimer()
		serialRuns := dockerRunArgvs(b, plan, fmt.Sprintf("bench-shell-%d", it))
		parallelRuns := dockerRunArgvs(b, plan, fmt.Sprintf("bench-shell4-%d", it))
		soloRun := dockerRunArgvs(b, plan1, fmt.Sprintf("bench-shell1-%d", it))
		b.StartTimer()
		shell += withRawProxy(b, ctx, plan, func() { runDockerLoop(b, ctx, env, serialRuns, 1) })
		shell4 += withRawProxy(b, ctx, plan, func() { runDockerLoop(b, ctx, env, parallelRuns, 4) })
		shell1 += withRawProxy(b, ctx, plan1, func() { runDockerLoop(b, ctx, env, soloRun, 1) })
		serial += apply(cfg, 1)
		par4 += apply(cfg, 4)
		serial1 += apply(cfg1, 1)
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
	perNode := func(d time.Duration) float64 { return ms(d) / float64(n) }
	// apply(N) - loop(N) = fixed + N*marginal and apply(1) - loop(1) = fixed + marginal.
	overN, over1 := ms(serial)-ms(shell), ms(serial1)-ms(shell1)
	marginal := (overN - over1) / float64(n-1)
	fixed := over1 - marginal
	b.ReportMetric(perNode(shell), "shell-ms/node")
	b.ReportMetric(perNode(serial), "apply-ms/node")
	b.ReportMetric(marginal, "overhead-ms/node")
	b.ReportMetric(fixed, "fixed-ms")
	b.ReportMetric(float64(serial)/float64(shell), "serial/shell")
	b.ReportMetric(perNode(shell4), "shell4-ms/node")
	b.ReportMetric(perNode(par4), "par4-ms/node")
	b.ReportMetric(float64(par4)/float64(shell4), "par4/shell4")
	b.Logf("%d nodes: serial: docker run loop %.0f ms/node, apply %.0f ms/node: %+.0f ms per node (goal ≤ +30) and %+.0f ms once per apply; 4-way: docker run loop %.0f ms/node, apply --parallelism 4 %.0f ms/node (ratio %.2f, goal ≤ 1.10)",
		n, perNode(shell), perNode(serial), marginal, fixed, perNode(shell4), perNode(par4), float64(par4)/float64(shell4))
}

// withRawProxy times run between the start and the removal of kewplan's egress proxy image as a script would run
// it: `docker run -d` with a configuration file bind-mounted (one user, the nodes' hosts), `docker network connect`
// to the nodes' allowlist network, and `docker rm -f` at the end.
func withRawProxy(b *testing.B, ctx context.Context, plan *planner.Plan, run func()) time.Duration {
	b.Helper()
	bin, err := os.Open(kewplanBin(b))
	if err != nil {
		b.Fatal(err)
	}
	image, err := egress.ImageTag(bin)
	bin.Close()
	if err != nil {
		b.Fatal(err)
	}
	np := plan.Nodes[0]
	allow := make([]string, len(np.Egress))
	for i, h := range np.Egress {
		allow[i] = h.String()
	}
	cfg, err := json.Marshal(egress.Config{Listen: egress.DefaultListen, Nodes: []egress.NodeConfig{{Name: "bench", Secret: "bench-secret-0123456789", Allow: allow}}})
	if err != nil {
		b.Fatal(err)
	}
	cfgFile := filepath.Join(b.TempDir(), "egress.json")
	if err := os.WriteFile(cfgFile, cfg, 0o644); err != nil {
		b.Fatal(err)
	}
	name := fmt.Sprintf("kewplan-bench-proxy-%d", time.Now().UnixNano())
	docker := func(args ...string) {
		if out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput(); err != nil {
			b.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	start := time.Now()
	docker("run", "-d", "--name", name, "--network", "bridge", "-v", cfgFile+":/egress.json:ro",
		"--entrypoint", egress.BinaryPath, image, egress.Subcommand, "--config", "/egress.json")
	docker("network", "connect", np.Container.Network, name)
	run()
	docker("rm", "-f", name)
	return time.Since(start)
}

// dockerRunArgvs prepares a checkout with its prompt file for every node of the plan and returns the `docker run`
// argv of each, as the plan shows it, with the container names made unique by tag.
func dockerRunArgvs(b *testing.B, plan *planner.Plan, tag string) [][]string {
	b.Helper()
	var out [][]string
	for _, np := range plan.Nodes {
		dir := filepath.Join(b.TempDir(), "checkout")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, planner.PromptFilename), []byte(np.Prompt.Text), 0o644); err != nil {
			b.Fatal(err)
		}
		if err := checkout.MakeWritableByAgent(dir); err != nil {
			b.Fatal(err)
		}
		out = append(out, docker.FillContainer(np.Container, tag, dir).Argv())
	}
	return out
}

// runDockerLoop runs the argvs with at most par at once, each as its own `docker run` process.
func runDockerLoop(b *testing.B, ctx context.Context, env []string, argvs [][]string, par int) {
	b.Helper()
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
				o.Hooks = nil
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
