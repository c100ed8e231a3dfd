package executor

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/kewplan/kewplan/egress"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/statedir"
)

var dynamicKewplanBinary struct {
	once sync.Once
	path string
	err  error
}

// dynamicKewplanBin builds kewplan the way `go install` does on a machine with a C compiler: CGO_ENABLED=1,
// which links the cgo resolver and makes a dynamically linked binary (checked: it has a PT_INTERP).
func dynamicKewplanBin(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set, so the dynamic-kewplan tests must run, but there is no C compiler")
		}
		t.Skip("skipping: no C compiler, so no dynamically linked kewplan can be built")
	}
	dynamicKewplanBinary.once.Do(func() {
		dir, err := os.MkdirTemp("", "kewplan-dynamic-")
		if err != nil {
			dynamicKewplanBinary.err = err
			return
		}
		path := filepath.Join(dir, "kewplan")
		build := exec.Command("go", "build", "-o", path, "../cmd/kewplan")
		build.Env = append(os.Environ(), "CGO_ENABLED=1")
		if out, err := build.CombinedOutput(); err != nil {
			dynamicKewplanBinary.err = &buildError{err: err, out: string(out)}
			return
		}
		dynamicKewplanBinary.path = path
	})
	if dynamicKewplanBinary.err != nil {
		t.Fatalf("go build CGO_ENABLED=1 ../cmd/kewplan: %v", dynamicKewplanBinary.err)
	}
	static, err := egress.StaticBinary(dynamicKewplanBinary.path)
	if err != nil || static {
		t.Fatalf("the CGO_ENABLED=1 build is not dynamically linked (static %v, %v): this test would prove nothing", static, err)
	}
	return dynamicKewplanBinary.path
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

// TestEgressProxyDynamicKewplan: a cgo-enabled, dynamically linked kewplan (`go run`, `go install`) serves as its
// own egress proxy. Its image FROM scratch carries the binary's interpreter and libraries; an allowlist node
// reaches the stub through it and is refused elsewhere, end to end through apply.
func TestEgressProxyDynamicKewplan(t *testing.T) {
	bin := dynamicKewplanBin(t)
	runtime, err := egress.RuntimeFiles(bin)
	if err != nil || len(runtime) == 0 {
		t.Fatalf("RuntimeFiles(dynamic kewplan) = %v, %v; want its interpreter and libraries", runtime, err)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	ic, err := egress.NewImageContext(data, runtime)
	if err != nil {
		t.Fatal(err)
	}

	f := newFixture(t)
	newEgressWorld(t, f)
	cfg := f.config(`
node "%[1]sdyn" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  ref    = "main"
  prompt = "mode=egress\ntargets=api.anthropic.com:443,evil.example.com:443"
}
`)
	sum, _, err := f.apply(context.Background(), cfg, func(o *ApplyOptions) {
		o.ProxyBinary = bin
		o.EgressAllowPrivateAddresses = true
	})
	if err != nil {
		t.Fatalf("apply with a dynamically linked kewplan as the proxy: %v", err)
	}
	f.assertClean(sum.RunID)
	r := resultOf(t, sum, f.node("dyn"))
	if !ledger.NodeSucceeded(r.Status) {
		t.Fatalf("node %s: %s (%s)", r.Node, r.Status, r.Reason)
	}
	rep := readEgressReport(t, r.StdoutLog)
	if got := rep.Results["api.anthropic.com:443"]; got.Status != 200 || got.Greeting != "kewplan-stub" {
		t.Errorf("CONNECT api.anthropic.com:443 through the dynamic proxy = %+v, want 200 through to the stub", got)
	}
	if got := rep.Results["evil.example.com:443"].Status; got != 403 {
		t.Errorf("CONNECT evil.example.com:443 = %d, want 403", got)
	}
	if reason := deniedFor(sum, "evil.example.com:443"); reason != egress.ReasonHostNotAllowed {
		t.Errorf("the denial of evil.example.com:443 was recorded as %q, want %q", reason, egress.ReasonHostNotAllowed)
	}
	if _, err := f.eng.InspectImage(context.Background(), ic.Tag); err != nil {
		t.Errorf("the proxy image of the dynamic build, %s, is not in the engine: %v", ic.Tag, err)
	}
	data, err = os.ReadFile(statedir.Dir{Root: f.stateDir}.EgressImageCache())
	if err != nil || !strings.Contains(string(data), ic.Tag) || !strings.Contains(string(data), `"runtime"`) {
		t.Errorf("the state directory's image record does not name %s with its runtime files: %s (%v)", ic.Tag, data, err)
	}
}
