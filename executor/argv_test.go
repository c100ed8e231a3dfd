package executor

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kewplan/kewplan/egress"
	"github.com/kewplan/kewplan/executor/docker"
	"github.com/kewplan/kewplan/executor/engine"
	"github.com/kewplan/kewplan/internal/testtools/testkit"
	"github.com/kewplan/kewplan/planner"
)

func TestAppliedArgvAddsThePIDLabelOnly(t *testing.T) {
	c := &planner.Container{Name: "kew-n", Node: "n", RunID: "r", Checkout: "/c", Image: "i", Network: "bridge", PidsLimit: 1}
	planned := c.Argv()
	applied := docker.AppliedArgv(c, 4242)
	if len(applied) != len(planned)+2 {
		t.Fatalf("docker.AppliedArgv() has %d words, want %d", len(applied), len(planned)+2)
	}
	i := slices.Index(applied, "kewplan.pid=4242")
	if i < 1 || applied[i-1] != "--label" || applied[i-2] != "kewplan.run=r" {
		t.Errorf("the pid label is not right after the run label: %q", applied)
	}
}

// TestArgvIsTheTruth creates one container with the docker CLI from the argv apply records, and one through the
// Engine API from the same planner.Container, and requires `docker inspect` to agree on every hardening field,
// for a node on the engine's default runtime and for one on gVisor's runsc (--runtime runsc).
func TestArgvIsTheTruth(t *testing.T) {
	f := newFixture(t)
	if _, err := exec.LookPath("docker"); err != nil {
		testkit.Need(t, "the docker CLI this test compares against is not installed")
	}
	cfg := f.config(`
node "%[1]sargv" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  prompt = "mode=succeed"
}
node "%[1]sargv-runsc" {
  runner  = "claude-code"
  model   = "claude-sonnet-4-5"
  runtime = "runsc"
  repo    = %[2]q
  prompt  = "mode=succeed"
}
`)
	plan := f.plan(cfg)
	for _, tc := range []struct{ node, runtime string }{{"argv", ""}, {"argv-runsc", planner.RuntimeRunsc}} {
		t.Run("runtime="+tc.runtime, func(t *testing.T) {
			if tc.runtime != "" {
				requireRunsc(t, f.eng)
			}
			np := plan.Node(f.node(tc.node))
			if np == nil || np.Container == nil {
				t.Fatal("the plan has no container for the node")
			}
			argvAgrees(t, f, np, tc.runtime)
		})
	}
}

// argvAgrees creates the node's container through the docker CLI and through the Engine API and compares them.
func argvAgrees(t *testing.T, f *fixture, np *planner.NodePlan, runtime string) {
	checkout := t.TempDir()
	c := docker.FillContainer(np.Container, "run-argv-"+randomSuffix(), checkout)
	environ := []string{"ANTHROPIC_API_KEY=sk-test-dummy", "PATH=" + os.Getenv("PATH")}
	// The proxy variables: the docker CLI takes `-e HTTPS_PROXY` from its environment, apply passes the values
	// it got from its proxy; the same values here, so that both containers must agree.
	proxyEnv := egress.ContainerEnv(egress.ProxyURL("10.9.8.7", egress.DefaultPort, "argv", strings.Repeat("ab", 32)))
	if !c.Proxied {
		t.Fatal("a claude-code node on the allowlist network is not proxied")
	}
	if c.BaseURL != "" {
		// A brokered node's base URL comes from the proxy too.
		proxyEnv[c.BaseURL] = egress.BrokerBaseURL("10.9.8.7", egress.DefaultPort, "argv", strings.Repeat("ab", 32), "api.anthropic.com", "")
		environ = append(environ, c.BaseURL+"="+proxyEnv[c.BaseURL])
	}
	for _, name := range c.ProxyEnv() {
		environ = append(environ, name+"="+proxyEnv[name])
	}
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		environ = append(environ, "DOCKER_HOST="+h)
	}
	argv := docker.AppliedArgv(c, os.Getpid())
	if argv[0] != "docker" || argv[1] != "run" {
		t.Fatalf("argv does not start with docker run: %q", argv)
	}
	if i := slices.Index(argv, "--runtime"); (runtime == "") != (i < 0) || (i >= 0 && argv[i+1] != runtime) {
		t.Fatalf("argv's --runtime does not say %q: %q", runtime, argv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	inspect := func(create func() string) *engine.InspectedContainer {
		t.Helper()
		id := create()
		defer func() {
			if err := f.eng.ForceRemove(id); err != nil {
				t.Error(err)
			}
		}()
		got, err := f.eng.InspectContainer(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	viaCLI := inspect(func() string {
		cmd := exec.CommandContext(ctx, "docker", append([]string{"create"}, argv[2:]...)...)
		cmd.Env = environ
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("docker create %q: %v\n%s", argv[2:], err, errOutput(err))
		}
		return strings.TrimSpace(string(out))
	})
	viaAPI := inspect(func() string {
		credentials := engine.EnvMap(environ)
		for name := range proxyEnv {
			delete(credentials, name) // never from kewplan's own environment
		}
		spec, err := docker.ApplyProxiedContainerSpec(c, credentials, proxyEnv, os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		id, err := f.eng.CreateContainer(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		return id
	})
	// The one documented difference: for an unset `-e NAME` the docker CLI sends a bare NAME entry (docker/cli
	// #1780), which kewplan never does. The names with values must agree exactly.
	if diff := cmp.Diff([]string{"CLAUDE_CODE_OAUTH_TOKEN"}, viaCLI.EnvWithoutValue); diff != "" {
		t.Errorf("the docker CLI's bare env entries changed (-want +got):\n%s", diff)
	}
	if len(viaAPI.EnvWithoutValue) != 0 {
		t.Errorf("kewplan sent bare env entries: %q", viaAPI.EnvWithoutValue)
	}
	viaCLI.EnvWithoutValue = nil
	if diff := cmp.Diff(viaCLI, viaAPI); diff != "" {
		t.Errorf("docker inspect differs between the argv (-) and the Engine API config (+):\n%s", diff)
	}
	// And both say what the plan promised.
	if !viaAPI.ReadonlyRootfs || !viaAPI.AutoRemove || viaAPI.PidsLimit != 128 || viaAPI.Memory != 256<<20 ||
		viaAPI.NanoCPUs != 1e9 || viaAPI.NetworkMode != f.network || viaAPI.WorkingDir != "/work" {
		t.Errorf("hardening fields are not the planned ones: %+v", viaAPI)
	}
	if wantRT := runtime; wantRT != "" && viaAPI.Runtime != wantRT {
		t.Errorf("the engine recorded runtime %q, want %q", viaAPI.Runtime, wantRT)
	} else if runtime == "" && viaAPI.Runtime == planner.RuntimeRunsc {
		t.Errorf("a node on the default runtime was created under runsc")
	}
	if !slices.Equal(viaAPI.DNS, []string{planner.ClosedDNS}) {
		t.Errorf("--dns: %q, want [%s]", viaAPI.DNS, planner.ClosedDNS)
	}
	for path, opts := range viaAPI.Tmpfs {
		if !strings.Contains(opts, "size=") {
			t.Errorf("tmpfs %s has no size: %q", path, opts)
		}
	}
	for _, name := range append(c.ProxyEnv(), planner.NoProxyVariable) {
		if !slices.Contains(viaAPI.EnvNames, name) {
			t.Errorf("%s did not reach the container's environment: %q", name, viaAPI.EnvNames)
		}
	}
	if slices.Contains(viaAPI.EnvNames, "CLAUDE_CODE_OAUTH_TOKEN") {
		t.Errorf("an unset credential reached the container's environment: %q", viaAPI.EnvNames)
	}
	if !slices.Contains(viaAPI.EnvNames, "ANTHROPIC_API_KEY") {
		t.Errorf("the set credential did not reach the container's environment: %q", viaAPI.EnvNames)
	}
}

func errOutput(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

// TestHardeningFromInside lets the fake agent probe its own container.
func TestHardeningFromInside(t *testing.T) {
	f := newFixture(t)
	cfg := f.config(`
node "%[1]sprobe" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  prompt = "mode=probe"
}
`)
	sum, _, err := f.apply(context.Background(), cfg, func(o *ApplyOptions) {
		// A decoy credential of another runner: it must not reach a claude-code container.
		o.Environ = append(o.Environ, "OPENROUTER_API_KEY=decoy")
	})
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	res := resultOf(t, sum, f.node("probe"))
	if res.StdoutLog == "" {
		t.Fatalf("the node never ran: %s: %s", res.Status, res.Reason)
	}
	var probe map[string]any
	logf, err := os.Open(res.StdoutLog)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	sc := bufio.NewScanner(logf)
	for sc.Scan() {
		var ev struct {
			Subtype string         `json:"subtype"`
			Probe   map[string]any `json:"probe"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Subtype == "probe" {
			probe = ev.Probe
		}
	}
	if probe == nil {
		t.Fatalf("the fake agent reported no probe (status %s: %s)", res.Status, res.Reason)
	}
	want := map[string]any{
		"root_write_erofs": true,
		"CapEff":           "0000000000000000",
		"CapBnd":           "0000000000000000",
		"CapPrm":           "0000000000000000",
		"NoNewPrivs":       "1",
		"uid":              float64(1001),
		"gid":              float64(1001),
		"cwd":              "/work",
		"home_exec":        "ok",
		"home_write":       "",
		"work_write":       "",
	}
	got := map[string]any{}
	for k := range want {
		got[k] = probe[k]
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hardening seen from inside (-want +got):\n%s", diff)
	}
	if s, _ := probe["tmp_exec"].(string); !strings.Contains(s, "permission denied") {
		t.Errorf("/tmp allows exec (want noexec): %q", s)
	}
	var names []string
	for _, n := range probe["env_names"].([]any) {
		names = append(names, n.(string))
	}
	for _, n := range names {
		if strings.Contains(n, "KEY") || strings.Contains(n, "TOKEN") {
			if n != "ANTHROPIC_API_KEY" {
				t.Errorf("credential %s reached the container; only the runner's set names may", n)
			}
		}
	}
	if !slices.Contains(names, "ANTHROPIC_API_KEY") {
		t.Errorf("the runner's set credential is missing inside: %q", names)
	}
	if slices.Contains(names, "CLAUDE_CODE_OAUTH_TOKEN") {
		t.Errorf("an unset credential is present inside: %q", names)
	}
}
