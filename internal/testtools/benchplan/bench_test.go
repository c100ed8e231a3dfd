package benchplan

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
)

// These benchmarks are what `make bench` reports. Each compares two things measured in the same
// iteration (so a loaded machine slows both alike) and reports the ratio with b.ReportMetric; none asserts a
// time. The kewplan binary is built once, as `make build` builds it. Every measured program runs as a child of
// this small process, so that a child's peak memory is its own (Linux counts the parent's at fork).

var (
	buildOnce sync.Once
	binPath   string
	parsePath string
	buildErr  error
)

// kewplanBinary builds cmd/kewplan once into a temporary directory, or returns $KEWPLAN_BENCH_BIN (to measure
// another build, such as main's, for a before/after comparison).
func kewplanBinary(b *testing.B) string {
	b.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "kewplan-bench-")
		if err != nil {
			buildErr = err
			return
		}
		binPath, parsePath = filepath.Join(dir, "kewplan"), filepath.Join(dir, "parseonly")
		build := [][2]string{{parsePath, "github.com/kewplan/kewplan/internal/testtools/benchplan/parseonly"}}
		if bin := os.Getenv("KEWPLAN_BENCH_BIN"); bin != "" {
			binPath = bin
		} else {
			build = append(build, [2]string{binPath, "github.com/kewplan/kewplan/cmd/kewplan"})
		}
		for _, out := range build {
			cmd := exec.Command("go", "build", "-o", out[0], out[1])
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if msg, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", out[1], err, msg)
				return
			}
		}
	})
	if buildErr != nil {
		b.Fatal(buildErr)
	}
	return binPath
}

// generated writes shape with n containers into a new temporary directory.
func generated(b *testing.B, shape string, n int) string {
	b.Helper()
	dir := b.TempDir()
	if err := Write(dir, shape, n); err != nil {
		b.Fatal(err)
	}
	return dir
}

// run is one kewplan process: wall time, CPU time (user+system) and peak resident memory.
type run struct {
	wall, cpu time.Duration
	maxRSS    int64 // bytes
}

// kewplan runs the binary with stdout and stderr to /dev/null; want is the exit status expected.
func kewplan(b *testing.B, want int, args ...string) run {
	b.Helper()
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer devnull.Close()
	cmd := exec.Command(kewplanBinary(b), args...)
	cmd.Stdout, cmd.Stderr = devnull, devnull
	start := time.Now()
	err = cmd.Run()
	wall := time.Since(start)
	if code := cmd.ProcessState.ExitCode(); code != want {
		b.Fatalf("kewplan %v: exit status %d, want %d (%v)", args, code, want, err)
	}
	r := run{wall: wall, cpu: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.maxRSS = ru.Maxrss << 10 // KiB on Linux
	}
	return r
}

// parseOnly is the floor: hclsyntax.ParseConfig of every .hcl file of dir and nothing else, timed inside the
// parseonly process (after it read the files, so neither process start nor reading is charged to it).
func parseOnly(b *testing.B, dir string) (wall, cpu time.Duration) {
	b.Helper()
	kewplanBinary(b)
	out, err := exec.Command(parsePath, dir).Output()
	if err != nil {
		b.Fatalf("parseonly %s: %v", dir, err)
	}
	var w, c int64
	if _, err := fmt.Sscan(string(out), &w, &c); err != nil {
		b.Fatalf("parseonly printed %q: %v", out, err)
	}
	return time.Duration(w), time.Duration(c)
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// BenchmarkPlanOverhead: `kewplan plan --json` (a whole process: start-up, load, plan, JSON to /dev/null)
// against hclsyntax.ParseConfig alone on the same files. plan/parse is the goal's ratio (≤ 1.3 on 10,000
// nodes), of the mean times; min-plan/parse of each side's fastest iteration, and med-plan/parse the median of
// each iteration's ratio, which the machine's other work distorts least (run with -benchtime 5x or more);
// cpu-plan/parse compares CPU time. peak-MB is the plan's
// peak resident memory. The for_each shape declares 100 blocks for 10,000 containers, so its file is small and
// its ratio measures the instances' planning against a tiny parse; plan-us/node is the comparable figure.
func BenchmarkPlanOverhead(b *testing.B) {
	for _, shape := range Shapes {
		for _, n := range []int{1000, 10000} {
			b.Run(fmt.Sprintf("%s-%d", shape, n), func(b *testing.B) {
				dir := generated(b, shape, n)
				kewplan(b, 0, "plan", "--json", dir) // warm the page cache and the binary
				var parse, parseCPU, plan, planCPU time.Duration
				minParse, minPlan := time.Duration(1<<62), time.Duration(1<<62)
				var peak int64
				var ratios []float64
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					w, c := parseOnly(b, dir)
					parse, parseCPU = parse+w, parseCPU+c
					r := kewplan(b, 0, "plan", "--json", dir)
					plan, planCPU = plan+r.wall, planCPU+r.cpu
					minParse, minPlan = min(minParse, w), min(minPlan, r.wall)
					peak = max(peak, r.maxRSS)
					ratios = append(ratios, float64(r.wall)/float64(w))
				}
				b.StopTimer()
				N := float64(b.N)
				b.ReportMetric(ms(parse)/N, "parse-ms")
				b.ReportMetric(ms(plan)/N, "plan-ms")
				b.ReportMetric(float64(plan)/float64(parse), "plan/parse")
				// Each side's fastest iteration: what the machine's other work added least to (hyperfine's min).
				b.ReportMetric(float64(minPlan)/float64(minParse), "min-plan/parse")
				// The median of each iteration's ratio: the two runs of an iteration follow each other, so a burst of
				// the machine's other work that slows one side of a few iterations moves it least.
				slices.Sort(ratios)
				b.ReportMetric(ratios[len(ratios)/2], "med-plan/parse")
				b.ReportMetric(float64(planCPU)/float64(max(parseCPU, time.Millisecond)), "cpu-plan/parse")
				b.ReportMetric(float64(peak)/(1<<20), "peak-MB")
				b.ReportMetric(float64(plan.Nanoseconds())/1e3/N/float64(n), "plan-us/node")
			})
		}
	}
}

// BenchmarkPlanGrowth: the wall and CPU time of planning 10,000 nodes over 1,000 nodes, in the same iteration
// (linear growth: ≤ 11).
func BenchmarkPlanGrowth(b *testing.B) {
	for _, shape := range Shapes {
		b.Run(shape, func(b *testing.B) {
			small, large := generated(b, shape, 1000), generated(b, shape, 10000)
			kewplan(b, 0, "plan", "--json", small)
			var s, l run
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				rs, rl := kewplan(b, 0, "plan", "--json", small), kewplan(b, 0, "plan", "--json", large)
				s.wall, s.cpu, l.wall, l.cpu = s.wall+rs.wall, s.cpu+rs.cpu, l.wall+rl.wall, l.cpu+rl.cpu
			}
			b.StopTimer()
			b.ReportMetric(float64(l.wall)/float64(s.wall), "10k/1k")
			b.ReportMetric(float64(l.cpu)/float64(max(s.cpu, time.Millisecond)), "cpu-10k/1k")
		})
	}
}

// BenchmarkValidateVsPlan: `kewplan validate` against `kewplan plan --json` on 10,000 nodes (goal: ≤ 1).
func BenchmarkValidateVsPlan(b *testing.B) {
	for _, shape := range Shapes {
		b.Run(shape+"-10000", func(b *testing.B) {
			dir := generated(b, shape, 10000)
			kewplan(b, 0, "validate", dir)
			var v, p run
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				rv, rp := kewplan(b, 0, "validate", dir), kewplan(b, 0, "plan", "--json", dir)
				v.wall, v.cpu, p.wall, p.cpu = v.wall+rv.wall, v.cpu+rv.cpu, p.wall+rp.wall, p.cpu+rp.cpu
			}
			b.StopTimer()
			b.ReportMetric(ms(v.wall)/float64(b.N), "validate-ms")
			b.ReportMetric(float64(v.wall)/float64(p.wall), "validate/plan")
			b.ReportMetric(float64(v.cpu)/float64(max(p.cpu, time.Millisecond)), "cpu-validate/plan")
		})
	}
}

// BenchmarkStartup: a whole `kewplan version`, and a whole plan of a 3-node chain (goal: each under 30 ms).
func BenchmarkStartup(b *testing.B) {
	dir := generated(b, "chain", 3)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"version", []string{"version"}},
		{"plan-3-nodes", []string{"plan", "--json", dir}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			kewplan(b, 0, tc.args...)
			var total run
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r := kewplan(b, 0, tc.args...)
				total.wall, total.cpu = total.wall+r.wall, total.cpu+r.cpu
				total.maxRSS = max(total.maxRSS, r.maxRSS)
			}
			b.StopTimer()
			b.ReportMetric(ms(total.wall)/float64(b.N), "wall-ms")
			b.ReportMetric(ms(total.cpu)/float64(b.N), "cpu-ms")
			b.ReportMetric(float64(total.maxRSS)/(1<<20), "peak-MB")
		})
	}
}

// BenchmarkSavedPlanSize: the bytes of a saved plan (plan --out) of 10,000 nodes against the configuration's.
func BenchmarkSavedPlanSize(b *testing.B) {
	for _, shape := range Shapes {
		b.Run(shape+"-10000", func(b *testing.B) {
			dir := generated(b, shape, 10000)
			out := filepath.Join(b.TempDir(), "bench.plan")
			for i := 0; i < b.N; i++ {
				kewplan(b, 0, "plan", "--out", out, dir)
			}
			b.StopTimer()
			planInfo, err := os.Stat(out)
			if err != nil {
				b.Fatal(err)
			}
			cfgInfo, err := os.Stat(filepath.Join(dir, "main.hcl"))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(planInfo.Size())/(1<<20), "plan-MB")
			b.ReportMetric(float64(planInfo.Size())/float64(cfgInfo.Size()), "plan/config")
		})
	}
}
