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

	"github.com/kewplan/kewplan/planner"
)

func TestContainerConfigFromPlannedFields(t *testing.T) {
	c := &planner.Container{
		Name: "kew-fix", Node: "fix", RunID: "r1", Checkout: "/state/checkouts/r1/fix", Image: "img@sha256:abc",
		Network: "kew-allowlist", PidsLimit: 512, Memory: "4g", CPUs: "1.5",
		Env: []string{"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"}, Args: []string{"--model", "m"},
	}
	spec, err := ContainerConfig(c, map[string]string{"ANTHROPIC_API_KEY": "sk-secret", "OPENROUTER_API_KEY": "other"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]any{
		"image": spec.Config.Image, "cmd": spec.Config.Cmd, "workdir": spec.Config.WorkingDir, "labels": spec.Config.Labels,
		"env": spec.Config.Env, "readonly": spec.HostConfig.ReadonlyRootfs, "tmpfs": spec.HostConfig.Tmpfs,
		"capdrop": spec.HostConfig.CapDrop, "secopt": spec.HostConfig.SecurityOpt, "pids": *spec.HostConfig.PidsLimit,
		"autoremove": spec.HostConfig.AutoRemove, "network": string(spec.HostConfig.NetworkMode), "binds": spec.HostConfig.Binds,
		"memory": spec.HostConfig.Memory, "nanocpus": spec.HostConfig.NanoCPUs, "name": spec.Name,
	}
	want := map[string]any{
		"image": "img@sha256:abc", "cmd": []string{"--model", "m"}, "workdir": "/work",
		"labels": map[string]string{"kewplan.node": "fix", "kewplan.run": "r1"},
		// Only names set in kewplan's environment travel, and only the runner's.
		"env": []string{"ANTHROPIC_API_KEY=sk-secret"}, "readonly": true,
		"tmpfs":   map[string]string{"/tmp": "", "/home/agent": "exec,uid=1001,gid=1001,mode=0700"},
		"capdrop": []string{"ALL"}, "secopt": []string{"no-new-privileges"}, "pids": int64(512), "autoremove": true,
		"network": "kew-allowlist", "binds": []string{"/state/checkouts/r1/fix:/work"}, "memory": int64(4 << 30),
		"nanocpus": int64(1_500_000_000), "name": "kew-fix",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ContainerConfig() mismatch (-want +got):\n%s", diff)
	}
}

func TestContainerConfigRefusesPlaceholders(t *testing.T) {
	c := &planner.Container{Name: "kew-x", RunID: planner.RunPlaceholder, Checkout: "/x", Image: "i", Network: "bridge"}
	if _, err := ContainerConfig(c, nil); err == nil || !strings.Contains(err.Error(), "placeholder") {
		t.Fatalf("ContainerConfig() error = %v, want a placeholder error", err)
	}
}

func TestParseCPUs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		err  bool
	}{
		{"2", 2e9, false}, {"1.5", 1.5e9, false}, {"0.000000001", 1, false},
		{"0.0000000001", 0, true}, {"-1", 0, true}, {"two", 0, true},
	} {
		got, err := ParseCPUs(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseCPUs(%q) = %d, %v; want %d, error %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestAppliedArgvAddsThePIDLabelOnly(t *testing.T) {
	c := &planner.Container{Name: "kew-n", Node: "n", RunID: "r", Checkout: "/c", Image: "i", Network: "bridge", PidsLimit: 1}
	planned := c.Argv()
	applied := AppliedArgv(c, 4242)
	if len(applied) != len(planned)+2 {
		t.Fatalf("AppliedArgv() has %d words, want %d", len(applied), len(planned)+2)
	}
	i := slices.Index(applied, "kewplan.pid=4242")
	if i < 1 || applied[i-1] != "--label" || applied[i-2] != "kewplan.run=r" {
		t.Errorf("the pid label is not right after the run label: %q", applied)
	}
}

// TestArgvIsTheTruth creates one container with the docker CLI from the argv apply records, and one through the
// Engine API from the same planner.Container, and requires `docker inspect` to agree on every hardening field.
func TestArgvIsTheTruth(t *testing.T) {
	f := newFixture(t)
	if _, err := exec.LookPath("docker"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set, but the docker CLI this test compares against is not installed")
		}
		t.Skip("skipping: the docker CLI this test compares against is not installed")
	}
	cfg := f.config(`
node "%[1]sargv" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  prompt = "mode=succeed"
}
`)
	np := f.plan(cfg).Node(f.node("argv"))
	if np == nil || np.Container == nil {
		t.Fatal("the plan has no container for the node")
	}
	checkout := t.TempDir()
	c := FillContainer(np.Container, "run-argv-"+randomSuffix(), checkout)
	environ := []string{"ANTHROPIC_API_KEY=sk-test-dummy", "PATH=" + os.Getenv("PATH")}
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		environ = append(environ, "DOCKER_HOST="+h)
	}
	argv := AppliedArgv(c, os.Getpid())
	if argv[0] != "docker" || argv[1] != "run" {
		t.Fatalf("argv does not start with docker run: %q", argv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	inspect := func(create func() string) *InspectedContainer {
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
		spec, err := ApplyContainerSpec(c, envMap(environ), os.Getpid())
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
