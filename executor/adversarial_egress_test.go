package executor

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kewplan/kewplan/executor/docker"
	"github.com/kewplan/kewplan/executor/engine"
	"github.com/kewplan/kewplan/planner"
)

// syncBuffer is a bytes.Buffer safe for the engine's stream goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestAdvEgressDNS (D6, DNS): an agent container as planned (--dns 127.0.0.1) cannot resolve an external name,
// and no query leaves it. The control proves the test would see one: the same container with --dns pointing at a
// stub resolver on the same network resolves through the stub, which logs the query.
func TestAdvEgressDNS(t *testing.T) {
	c := adv(t, "D6", "resolve an external name from an agent container (DNS exfiltration)",
		"fails: the planned --dns 127.0.0.1 leaves Docker's embedded resolver no upstream; no query leaves (a stub resolver sees the control's)")
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	queries := &syncBuffer{}
	stub, err := f.eng.StartService(ctx, engine.ServiceSpec{
		Name: "kewplan-test-dns-" + randomSuffix(), Image: f.image, Cmd: []string{"--dns-stub", ":53"},
		Labels: map[string]string{"kewplan.test": "1"}, Networks: []string{f.network},
	}, nil, queries, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := stub.Stop(); err != nil {
			t.Error(err)
		}
	}()
	stubIP, err := stub.IPAddress(ctx, f.network)
	if err != nil {
		t.Fatal(err)
	}
	np := f.plan(f.config(`
node "%[1]sdns" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  prompt = "mode=succeed"
}
`)).Node(f.node("dns"))
	if np == nil || np.Container == nil {
		t.Fatal("no container planned")
	}
	if len(np.Container.DNS) != 1 || np.Container.DNS[0] != planner.ClosedDNS {
		t.Fatalf("the planned --dns is %q, want [%s]", np.Container.DNS, planner.ClosedDNS)
	}
	resolveIn := func(ct *planner.Container, name string) string {
		t.Helper()
		spec, err := engine.ContainerConfig(ct, nil)
		if err != nil {
			t.Fatal(err)
		}
		spec.SetEntrypoint([]string{"/fakeagent"}, []string{"--resolve", name})
		res, err := f.eng.RunCapture(ctx, spec, time.Minute, 4096)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(res.Stdout))
	}
	suffix := randomSuffix()
	closedName, controlName := "closed-"+suffix+".example.com", "control-"+suffix+".example.com"

	// First the planned container, then the control: the stub's log is ordered, so once the control's query is
	// in it, a query of the planned container would be too.
	planned := docker.FillContainer(np.Container, "run-dns-"+suffix, t.TempDir())
	planned.Name += "-closed-" + suffix
	closed := resolveIn(planned, closedName)
	control := docker.FillContainer(np.Container, "run-dns-"+suffix, t.TempDir())
	control.Name += "-control-" + suffix
	control.DNS = []string{stubIP.String()}
	opened := resolveIn(control, controlName)

	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(queries.String(), controlName) && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	log := queries.String()
	if !strings.HasPrefix(opened, "resolved 192.0.2.77") || !strings.Contains(log, controlName) {
		t.Fatalf("the control did not resolve through the stub, so this test could not see a query leave: %q; stub log %q", opened, log)
	}
	c.check(strings.HasPrefix(closed, "failed") && !strings.Contains(log, closedName),
		"planned --dns %s: %s; the stub saw the control's query and none of the agent's", planner.ClosedDNS, closed)
}
