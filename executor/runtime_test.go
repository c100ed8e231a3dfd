package executor

// The isolation tier against the real engine: a node on gVisor's runsc runs the fake agent under
// gVisor's kernel with the contract's hardening intact and its work pushed; a runtime the engine lacks is refused
// in preflight with the fix. The runsc tests fail (not skip) under CI when the engine has no runsc: `make
// test-deps` registers it (scripts/runsc-setup.sh).

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kewplan/kewplan/executor/engine"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/internal/testtools/testkit"
	"github.com/kewplan/kewplan/planner"
)

// requireRunsc skips (locally) or fails (CI set) unless the engine lists the runsc runtime.
func requireRunsc(t testing.TB, eng *engine.Engine) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	names, _, err := eng.Runtimes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(names, planner.RuntimeRunsc) {
		return
	}
	msg := "the engine has no runsc runtime (it has " + strings.Join(names, ", ") + "); register it with `sudo scripts/runsc-setup.sh` (make test-deps does)"
	testkit.Need(t, msg)
}

// readProbe returns the last probe the fake agent reported in a node's stdout log.
func readProbe(t testing.TB, res ledger.NodeResult) map[string]any {
	t.Helper()
	if res.StdoutLog == "" {
		t.Fatalf("node %s never ran: %s: %s", res.Node, res.Status, res.Reason)
	}
	logf, err := os.Open(res.StdoutLog)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	var probe map[string]any
	sc := bufio.NewScanner(logf)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
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
		t.Fatalf("node %s: the fake agent reported no probe (%s: %s)", res.Node, res.Status, res.Reason)
	}
	return probe
}

// hardeningView is the part of a probe that must read the same under every runtime.
func hardeningView(p map[string]any) map[string]any {
	out := map[string]any{}
	for _, k := range []string{"uid", "gid", "cwd", "CapEff", "CapBnd", "CapPrm", "root_write_refused", "home_exec", "home_write", "work_write", "env_names"} {
		out[k] = p[k]
	}
	tmp, _ := p["tmp_exec"].(string)
	out["tmp_noexec"] = strings.Contains(tmp, "permission denied")
	return out
}

// TestRunscApplyProbe (C11) applies two nodes side by side, one on the engine's default runtime and one with
// runtime = "runsc": the runsc node sees gVisor's kernel in /proc/version (the runc node sees the host's), the same
// hardening from inside (uid 1001, no capabilities, read-only root, noexec /tmp, the writable set, the credential
// names), and its commit is pushed. gVisor's legitimate differences are checked as such: no NoNewPrivs line in
// /proc/self/status and Seccomp 0 inside the sandbox, EACCES rather than EROFS on the read-only root.
func TestRunscApplyProbe(t *testing.T) {
	f := newFixture(t)
	requireRunsc(t, f.eng)
	cfg := f.config(`
node "%[1]srunc" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  prompt = "mode=probe"
}
node "%[1]sgvisor" {
  runner  = "claude-code"
  model   = "claude-sonnet-4-5"
  runtime = "runsc"
  repo    = %[2]q
  ref     = "main"
  branch  = "kew/gvisor-work"
  prompt  = "mode=commit\nprobe=1\nfile=GVISOR.md\ncontent=written under gVisor"
}
`)
	sum, _, err := f.apply(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	runc, gv := resultOf(t, sum, f.node("runc")), resultOf(t, sum, f.node("gvisor"))
	for _, r := range []ledger.NodeResult{runc, gv} {
		if r.Status != ledger.StatusSucceeded {
			t.Fatalf("node %s: %s: %s", r.Node, r.Status, r.Reason)
		}
	}
	// The recorded argv says which runtime ran each node.
	if i := slices.Index(gv.Argv, "--runtime"); i < 0 || gv.Argv[i+1] != "runsc" {
		t.Errorf("the runsc node's recorded argv has no --runtime runsc: %q", gv.Argv)
	}
	if slices.Contains(runc.Argv, "--runtime") {
		t.Errorf("the default-runtime node's argv names a runtime: %q", runc.Argv)
	}

	pr, pg := readProbe(t, runc), readProbe(t, gv)
	// The kernel: gVisor's Sentry, not the host's.
	host, err := os.ReadFile("/proc/version")
	if err != nil {
		t.Fatal(err)
	}
	gvVersion, _ := pg["proc_version"].(string)
	if gvVersion == strings.TrimSpace(string(host)) || !strings.Contains(gvVersion, "Linux version 4.4.0") {
		t.Errorf("the runsc node does not see gVisor's kernel: /proc/version %q (host %q)", gvVersion, strings.TrimSpace(string(host)))
	}
	if v, _ := pr["proc_version"].(string); v != strings.TrimSpace(string(host)) {
		t.Errorf("the runc node's /proc/version %q is not the host's %q", v, strings.TrimSpace(string(host)))
	}
	// The hardening: the same from inside.
	want := map[string]any{
		"uid": float64(planner.AgentUID), "gid": float64(planner.AgentUID), "cwd": planner.WorkDir,
		"CapEff": "0000000000000000", "CapBnd": "0000000000000000", "CapPrm": "0000000000000000",
		"root_write_refused": true, "home_exec": "ok", "home_write": "", "work_write": "", "tmp_noexec": true,
		"env_names": pr["env_names"],
	}
	if diff := cmp.Diff(want, hardeningView(pr)); diff != "" {
		t.Errorf("hardening under runc (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(hardeningView(pr), hardeningView(pg)); diff != "" {
		t.Errorf("hardening under runsc differs from runc (-runc +runsc):\n%s", diff)
	}
	// gVisor's documented differences (README: Isolation tiers).
	if pr["NoNewPrivs"] != "1" || pr["root_write_erofs"] != true {
		t.Errorf("runc: NoNewPrivs %v, EROFS %v; want 1, true", pr["NoNewPrivs"], pr["root_write_erofs"])
	}
	if v, ok := pg["NoNewPrivs"]; ok && v != "1" {
		t.Errorf("runsc reports NoNewPrivs %v: a value other than 1 would mean no-new-privileges is off", v)
	}
	t.Logf("runsc: /proc/version %q, NoNewPrivs %v, Seccomp %v, root write %v", gvVersion, pg["NoNewPrivs"], pg["Seccomp"], pg["root_write_error"])
	// The work, pushed.
	if !gv.Pushed || gv.Branch != "kew/gvisor-work" || gv.Commit == gv.BaseCommit {
		t.Fatalf("runsc node: pushed %v, branch %q, commit %s (base %s)", gv.Pushed, gv.Branch, gv.Commit, gv.BaseCommit)
	}
	out, err := exec.Command("git", "-C", f.repo, "show", "refs/heads/kew/gvisor-work:GVISOR.md").Output()
	if err != nil || strings.TrimSpace(string(out)) != "written under gVisor" {
		t.Errorf("the pushed branch's GVISOR.md = %q (%v)", out, err)
	}
}

// TestRuntimeMissingRefusedInPreflight: a node on a runtime the engine has not registered fails preflight with the
// fix, and nothing runs (no checkout, no ledger row, no container).
func TestRuntimeMissingRefusedInPreflight(t *testing.T) {
	f := newFixture(t)
	absent := "kewplan-absent-" + randomSuffix()
	cfg := f.config(`
node "%[1]sok" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  prompt = "mode=succeed"
}
node "%[1]sother" {
  runner  = "claude-code"
  model   = "claude-sonnet-4-5"
  runtime = "` + absent + `"
  repo    = %[2]q
  prompt  = "mode=succeed"
}
`)
	sum, _, err := f.apply(context.Background(), cfg)
	if sum != nil {
		f.assertClean(sum.RunID)
		t.Fatalf("apply ran (%s); want a preflight refusal", sum.Status)
	}
	var pe *PreflightError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want a *PreflightError", err)
	}
	for _, want := range []string{`node "` + f.node("other") + `": the container runtime "` + absent + `" is not registered with the Docker Engine`,
		"kewplan never falls back to another runtime", `"runtimes" of /etc/docker/daemon.json`, "reload the engine"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), f.node("ok")) {
		t.Errorf("the refusal blames the node on the default runtime: %v", err)
	}
	if _, err := os.Stat(f.stateDir + "/checkouts"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a checkout was made: %v", err)
	}
}
