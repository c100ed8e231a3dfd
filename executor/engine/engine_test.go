package engine

import (
	"strings"
	"testing"

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

// TestContainerConfigRuntime: --runtime NAME in the argv is HostConfig.Runtime; no runtime leaves the engine's
// default (an empty Runtime, and no flag).
func TestContainerConfigRuntime(t *testing.T) {
	for _, rt := range []string{"", "runsc"} {
		c := &planner.Container{Name: "kew-x", Node: "x", RunID: "r", Checkout: "/c", Image: "i", Network: "bridge", Runtime: rt}
		spec, err := ContainerConfig(c, nil)
		if err != nil {
			t.Fatal(err)
		}
		if spec.HostConfig.Runtime != rt || spec.Clone().HostConfig.Runtime != rt {
			t.Errorf("runtime %q: HostConfig.Runtime = %q (clone %q)", rt, spec.HostConfig.Runtime, spec.Clone().HostConfig.Runtime)
		}
		argv := strings.Join(c.Argv(), " ")
		if has := strings.Contains(argv, "--runtime "+rt); (rt != "") != has || (rt == "" && strings.Contains(argv, "--runtime")) {
			t.Errorf("runtime %q: argv %s", rt, argv)
		}
	}
}
