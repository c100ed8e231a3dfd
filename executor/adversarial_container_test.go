//go:build linux

package executor

// Section C of the checklist: the container's configuration, asserted the way docker-bench-security and moby's
// integration tests do (inspect fields), and probed from inside by the hostile agent, each with a live control that
// proves the probe would see the attack succeed without kewplan's hardening.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kewplan/kewplan/executor/docker"
	"github.com/kewplan/kewplan/executor/engine"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/planner"
)

// inspectJSON is the part of GET /containers/{id}/json the CIS run-time checks read.
type inspectJSON struct {
	Config struct {
		User string
	}
	HostConfig struct {
		Privileged     bool
		ReadonlyRootfs bool
		CapAdd         []string
		CapDrop        []string
		SecurityOpt    []string
		PidsLimit      *int64
		Memory         int64
		MemorySwap     int64
		NetworkMode    string
		PidMode        string
		IpcMode        string
		UTSMode        string
		UsernsMode     string
		CgroupnsMode   string
		Tmpfs          map[string]string
		Binds          []string
		Devices        []any
		AutoRemove     bool
	}
	Mounts []struct {
		Type        string
		Source      string
		Destination string
		RW          bool
		Propagation string
	}
	AppArmorProfile string
}

// TestAdvContainerInspect (C1): a container apply started, inspected while it runs.
func TestAdvContainerInspect(t *testing.T) {
	c := adv(t, "C1", "inspect a running kewplan container (docker-bench section 5 fields)",
		"read-only root; CapDrop [ALL], no CapAdd; no-new-privileges and no unconfined; PidsLimit>0; not privileged; Memory>0; "+
			"exactly one rw rprivate bind at /work and two tmpfs; no docker.sock; allowlist network; no host namespaces; non-root user")
	f := advFixture(t)
	api := newEngineAPI(t)
	cfg := f.config(advNode("inspect", "reviewer", "mode=wait\nverdict=approve", ""))
	var once sync.Once
	var got inspectJSON
	inspected := false
	sum, _, err := f.apply(context.Background(), cfg, func(o *ApplyOptions) {
		o.Hooks[0].(*recorder).onProg = func(e NodeProgressEvent) {
			if e.Totals.SessionID == "" {
				return
			}
			once.Do(func() {
				// The init event was metered: the container runs and waits for the release file.
				// This runs on the goroutine that meters the agent's output: errors, never t.Fatal.
				ids, err := api.containersOfRun(e.RunID)
				if err != nil {
					t.Error(err)
				}
				for _, id := range ids {
					if status, err := api.tryGet("/containers/"+id+"/json", &got); err != nil {
						t.Error(err)
					} else if status == 200 {
						inspected = true
					}
				}
				release := filepath.Join(f.checkoutOf(e.RunID, e.Node), ".adv-release")
				if err := os.WriteFile(release, nil, 0o644); err != nil {
					t.Error(err)
				}
			})
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	res := resultOf(t, sum, f.node("inspect"))
	if !inspected {
		t.Fatalf("the running container was never inspected (%s: %s)", res.Status, res.Reason)
	}
	h := got.HostConfig
	c.check(h.ReadonlyRootfs, "ReadonlyRootfs=%v", h.ReadonlyRootfs)
	c.check(slices.Equal(h.CapDrop, []string{"ALL"}) && len(h.CapAdd) == 0, "CapDrop=%v CapAdd=%v", h.CapDrop, h.CapAdd)
	nnp, unconfined := false, false
	for _, o := range h.SecurityOpt {
		nnp = nnp || strings.HasPrefix(o, "no-new-privileges")
		unconfined = unconfined || strings.Contains(o, "unconfined")
	}
	c.check(nnp && !unconfined, "SecurityOpt=%v", h.SecurityOpt)
	c.check(h.PidsLimit != nil && *h.PidsLimit > 0, "PidsLimit=%v", deref(h.PidsLimit))
	c.check(!h.Privileged, "Privileged=%v", h.Privileged)
	c.check(h.Memory > 0, "Memory=%d", h.Memory)
	c.check(h.NetworkMode == f.network, "NetworkMode=%q", h.NetworkMode)
	for name, mode := range map[string]string{"PidMode": h.PidMode, "IpcMode": h.IpcMode, "UTSMode": h.UTSMode, "UsernsMode": h.UsernsMode} {
		c.check(mode != "host", "%s=%q", name, mode)
	}
	c.check(len(h.Devices) == 0, "Devices=%v", h.Devices)
	var binds []string
	for _, m := range got.Mounts {
		c.check(!strings.Contains(m.Source, "docker.sock"), "mount %s -> %s", m.Source, m.Destination)
		if m.Type == "bind" {
			binds = append(binds, m.Destination)
			c.check(m.Destination == planner.WorkDir && m.RW && (m.Propagation == "rprivate" || m.Propagation == ""),
				"bind %s rw=%v propagation=%q", m.Destination, m.RW, m.Propagation)
		}
	}
	c.check(slices.Equal(binds, []string{planner.WorkDir}), "bind mounts %v", binds)
	var tmpfs []string
	for k := range h.Tmpfs {
		tmpfs = append(tmpfs, k)
	}
	slices.Sort(tmpfs)
	c.check(slices.Equal(tmpfs, []string{planner.AgentHomeTmpfs, planner.ScratchTmpfs}), "tmpfs %v", tmpfs)
	user, _, _ := strings.Cut(got.Config.User, ":")
	c.check(user != "" && user != "0" && user != "root", "User=%q", got.Config.User)
	c.check(got.AppArmorProfile != "unconfined", "AppArmorProfile=%q", got.AppArmorProfile)
	if res.Status != ledger.StatusApproved {
		t.Errorf("the inspected reviewer ended %s (%s), want approved", res.Status, res.Reason)
	}
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// probeRun runs the hostile agent's probe in a container built from the node's planned configuration, changed by
// mutate (the live controls take one protection away), and returns its report.
func probeRun(t *testing.T, f *fixture, prompt string, mutate func(*engine.ContainerSpec)) map[string]any {
	t.Helper()
	cfg := f.config(advNode("control", "", prompt, ""))
	np := f.plan(cfg).Node(f.node("control"))
	if np == nil || np.Container == nil {
		t.Fatal("the plan has no container for the control node")
	}
	checkout := t.TempDir()
	if err := os.Chmod(checkout, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(checkout, planner.PromptFilename), []byte(prompt), 0o644); err != nil {
		t.Fatal(err)
	}
	spec, err := engine.ContainerConfig(docker.FillContainer(np.Container, "adv-control-"+randomSuffix(), checkout), map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	spec.Name = "kew-adv-control-" + randomSuffix()
	mutate(spec)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := f.eng.RunCapture(ctx, spec, time.Minute, 4<<20)
	if err != nil {
		t.Fatalf("control run: %v", err)
	}
	logPath := filepath.Join(t.TempDir(), "control.log")
	if err := os.WriteFile(logPath, out.Stdout, 0o600); err != nil {
		t.Fatal(err)
	}
	return agentReport(t, ledger.NodeResult{Node: "control", StdoutLog: logPath})
}

// TestAdvContainerFromInside (C2-C7): the hostile agent probes its own container through a real apply; each item
// has a live control that removes exactly one protection and shows the probe then sees the attack succeed.
func TestAdvContainerFromInside(t *testing.T) {
	f := advFixture(t)
	cfg := f.config(advNode("probe", "reviewer", "mode=probe\nverdict=approve", ""))
	sum, _, err := f.apply(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	res := resultOf(t, sum, f.node("probe"))
	r := agentReport(t, res)
	if res.Status != ledger.StatusApproved {
		t.Errorf("probe node %s (%s), want approved", res.Status, res.Reason)
	}

	t.Run("C2", func(t *testing.T) {
		c := adv(t, "C2", "write a file in / and under /usr/local/bin", "EROFS (read-only file system)")
		c.check(r["root_write_erofs"] == true, "write / -> %s", reportString(r, "root_write"))
		c.check(r["sysdir_write_erofs"] == true, "mkdir /usr/local/bin -> %s", reportString(r, "sysdir_write"))
		ctl := probeRun(t, f, "mode=probe", func(s *engine.ContainerSpec) { s.HostConfig.ReadonlyRootfs = false; s.Config.User = "0:0" })
		c.check(reportString(ctl, "root_write") == "", "control (root, no --read-only): write / -> %q", reportString(ctl, "root_write"))
	})

	t.Run("C3", func(t *testing.T) {
		c := adv(t, "C3", "read mountinfo; try to create a file on every mount",
			"/tmp noexec,nosuid,nodev; /home/agent exec,nosuid,nodev,uid=gid=1001,mode=0700; tmpfs pages bounded (size= or the --memory cgroup); "+
				"writable only /work, /tmp, /home/agent, /dev/shm, /dev/mqueue")
		mounts := map[string]map[string]string{}
		for _, m := range r["mounts"].([]any) {
			mm := map[string]string{}
			for k, v := range m.(map[string]any) {
				mm[k] = v.(string)
			}
			mounts[mm["point"]] = mm
		}
		flags := func(point string) map[string]bool {
			out := map[string]bool{}
			for _, o := range strings.Split(mounts[point]["opts"]+","+mounts[point]["super"], ",") {
				k, _, _ := strings.Cut(o, "=")
				out[k] = true
			}
			return out
		}
		tmp, home := flags("/tmp"), flags("/home/agent")
		c.check(mounts["/tmp"]["fstype"] == "tmpfs" && tmp["noexec"] && tmp["nosuid"] && tmp["nodev"],
			"/tmp %s %s %s", mounts["/tmp"]["fstype"], mounts["/tmp"]["opts"], mounts["/tmp"]["super"])
		c.check(mounts["/home/agent"]["fstype"] == "tmpfs" && !home["noexec"] && home["nosuid"] && home["nodev"] &&
			strings.Contains(mounts["/home/agent"]["super"], "uid=1001") && strings.Contains(mounts["/home/agent"]["super"], "gid=1001") &&
			strings.Contains(mounts["/home/agent"]["super"], "mode=700"),
			"/home/agent %s %s %s", mounts["/home/agent"]["fstype"], mounts["/home/agent"]["opts"], mounts["/home/agent"]["super"])
		sized := tmp["size"] && home["size"]
		c.check(sized || hadMemoryLimit(res), "tmpfs size= set: %v; container memory limit set: %v (tmpfs pages are charged to the "+
			"container's memory cgroup, which C9 shows stops a fill)", sized, hadMemoryLimit(res))
		var writable []string
		for _, w := range r["writable"].([]any) {
			writable = append(writable, w.(string))
		}
		allowed := []string{"/dev/mqueue", "/dev/shm", "/home/agent", "/tmp", "/work"}
		extra := false
		for _, w := range writable {
			if !slices.Contains(allowed, w) {
				extra = true
			}
		}
		c.check(!extra && slices.Contains(writable, "/work") && slices.Contains(writable, "/tmp"), "writable by uid 1001: %v", writable)
	})

	t.Run("C4", func(t *testing.T) {
		c := adv(t, "C4", "copy a binary to /tmp and execute it", "EACCES from /tmp; /home/agent (exec by contract) runs it")
		c.check(strings.Contains(reportString(r, "tmp_exec"), "permission denied"), "/tmp: %s", reportString(r, "tmp_exec"))
		c.check(reportString(r, "home_exec") == "ok", "/home/agent (live control): %s", reportString(r, "home_exec"))
		c.observe("noexec is hygiene, not a boundary: an interpreter can still read a script from /tmp (the test image has none)")
	})

	t.Run("C5", func(t *testing.T) {
		c := adv(t, "C5", "read CapEff, CapBnd, NoNewPrivs, Seccomp from /proc/self/status", "CapEff=0, CapBnd=0, NoNewPrivs=1, Seccomp=2")
		zero := "0000000000000000"
		for _, k := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
			c.check(reportString(r, k) == zero, "%s=%s", k, reportString(r, k))
		}
		c.check(reportString(r, "NoNewPrivs") == "1", "NoNewPrivs=%s", reportString(r, "NoNewPrivs"))
		c.check(reportString(r, "Seccomp") == "2", "Seccomp=%s", reportString(r, "Seccomp"))
	})

	t.Run("C6", func(t *testing.T) {
		c := adv(t, "C6", "run a setuid-root binary from the image", "its effective uid is 1001, not 0")
		c.check(strings.HasPrefix(reportString(r, "suid_mode"), "u"), "/suid mode %s (setuid root in the image)", reportString(r, "suid_mode"))
		c.check(reportString(r, "suid_euid") == "1001", "euid %q (%s)", reportString(r, "suid_euid"), reportString(r, "suid_error"))
		ctl := probeRun(t, f, "mode=probe", func(s *engine.ContainerSpec) { s.HostConfig.SecurityOpt = nil })
		c.check(reportString(ctl, "suid_euid") == "0", "control (no no-new-privileges): euid %q", reportString(ctl, "suid_euid"))
	})

	t.Run("C7", func(t *testing.T) {
		c := adv(t, "C7", "unshare user, mount and net namespaces; mount a tmpfs; chroot", "EPERM for each")
		for _, k := range []string{"unshare_user", "unshare_mount", "unshare_net", "mount_tmpfs", "chroot"} {
			c.check(reportString(r, k) == "operation not permitted", "%s: %q", k, reportString(r, k))
		}
		ctl := probeRun(t, f, "mode=probe", func(s *engine.ContainerSpec) {
			s.HostConfig.SecurityOpt = append(s.HostConfig.SecurityOpt, "seccomp=unconfined")
		})
		c.check(reportString(ctl, "unshare_user") == "", "control (seccomp=unconfined): unshare user -> %q", reportString(ctl, "unshare_user"))
	})
}

// hadMemoryLimit reports whether the node's container had a memory limit (the fixture always sets one).
func hadMemoryLimit(r ledger.NodeResult) bool {
	for i, w := range r.Argv {
		if w == "--memory" && i+1 < len(r.Argv) && r.Argv[i+1] != "" && r.Argv[i+1] != "0" {
			return true
		}
	}
	return false
}

// TestAdvForkBomb (C8): the agent forks until the pids cgroup refuses, keeps trying, and is killed at its deadline.
func TestAdvForkBomb(t *testing.T) {
	c := adv(t, "C8", "fork bomb: start copies of itself until refused, keep trying",
		"capped by --pids-limit; host unaffected; killed at the node deadline; fails closed; container removed")
	f := advFixture(t)
	cfg := f.config(advNode("bomb", "reviewer", "mode=forkbomb\nverdict=approve", "  timeout = \"5s\"\n"))
	sum, _, err := f.apply(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	res := resultOf(t, sum, f.node("bomb"))
	r := agentReport(t, res)
	c.check(reportString(r, "pids_max") == "128" && reportString(r, "pids_current") != "" && atoi(reportString(r, "pids_current")) <= 128,
		"pids cgroup: max %s, current %s when the fork was refused (%s tasks seen in /proc, %s processes started)",
		reportString(r, "pids_max"), reportString(r, "pids_current"), reportString(r, "tasks"), reportString(r, "started"))
	c.check(strings.Contains(reportString(r, "first_error"), "resource temporarily unavailable"), "refusal: %s", reportString(r, "first_error"))
	c.check(res.Status == ledger.StatusTimedOut, "node %s: %s", res.Status, res.Reason)
}

// TestAdvMemoryExhaustion (C9): filling /tmp and allocating memory past the limit stop inside the container.
func TestAdvMemoryExhaustion(t *testing.T) {
	c := adv(t, "C9", "fill /tmp with zeros; allocate twice the memory limit",
		"stopped inside the container (ENOSPC or the OOM killer at --memory); host unaffected; kewplan reports it and fails closed")
	f := advFixture(t)
	cfg := f.config(advNode("tmpfill", "reviewer", "mode=tmpfill\nverdict=approve", "  timeout = \"2m\"\n") +
		advNode("memfill", "reviewer", "mode=memfill\nverdict=approve", "  timeout = \"2m\"\n"))
	before := memAvailable()
	sum, _, err := f.apply(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	for _, name := range []string{"tmpfill", "memfill"} {
		res := resultOf(t, sum, f.node(name))
		killed := res.ExitCode != nil && *res.ExitCode == 137
		c.check(res.Status == ledger.StatusFailed && (killed || strings.Contains(res.Reason, "no space")),
			"%s: %s, exit %v: %s", name, res.Status, deref(res.ExitCode), res.Reason)
		if killed {
			// An OOM kill must read as one, not as a bare exit status.
			c.check(strings.Contains(res.Reason, "OOM killer") && strings.Contains(res.Reason, "256m"), "%s: the reason names the OOM killer and the limit", name)
		}
	}
	c.observe("host MemAvailable %d MiB before, %d MiB after", before>>20, memAvailable()>>20)
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}

func memAvailable() int64 {
	b, _ := os.ReadFile("/proc/meminfo")
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == "MemAvailable" {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
			return kb << 10
		}
	}
	return 0
}
