package k8snode

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// state is what a node changed on the machine, written before each change is made (a crash between the write and
// the change leaves an entry whose undo finds nothing to undo) and read back by Stop or by the next Start of the
// same slot.
type state struct {
	Slot      int         `json:"slot"`
	Detached  bool        `json:"detached"`
	NetNS     string      `json:"netns,omitempty"`
	HostLink  string      `json:"host_link,omitempty"`
	Routes    []string    `json:"routes,omitempty"`  // destinations of the unreachable routes in the host namespace
	Cgroup    string      `json:"cgroup,omitempty"`  // the node's cgroup, under every v1 hierarchy
	Procs     []procEntry `json:"procs,omitempty"`   // started processes, by pid and start time
	Sysctls   bool        `json:"sysctls,omitempty"` // this node saved the host's sysctls (sysctlFile)
	StartedAt string      `json:"started_at,omitempty"`
}

type procEntry struct {
	Name  string `json:"name"`
	PID   int    `json:"pid"`
	Start uint64 `json:"start"` // field 22 of /proc/PID/stat: tells a reused pid from ours
}

func (n *Node) saveState() error {
	data, err := json.MarshalIndent(&n.st, "", "  ")
	if err != nil {
		return err
	}
	tmp := n.statePath() + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, n.statePath())
}

func (n *Node) statePath() string { return filepath.Join(n.Dir, "state.json") }

func readState(path string) (*state, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var st state
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &st, nil
}

// procStart is the start time of pid in clock ticks since boot, 0 when there is no such process.
func procStart(pid int) uint64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 20 {
		return 0
	}
	v, _ := strconv.ParseUint(fields[19], 10, 64)
	return v
}

// alive says whether the process of e still runs (the same pid and start time).
func (e procEntry) alive() bool { return e.PID > 0 && procStart(e.PID) == e.Start && e.Start != 0 }

func (e procEntry) kill() {
	if e.alive() {
		_ = syscall.Kill(e.PID, syscall.SIGKILL)
	}
}

// Host sysctls the kubelet sets to its own values (kubelet's setupKernelTunables). The first node to start saves
// them; the last one to stop puts them back.
var hostSysctls = []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops", "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"}

func sysctlFile(root string) string { return filepath.Join(root, "host-sysctls.json") }

func saveSysctls(root string) error {
	path := sysctlFile(root)
	if _, err := os.Stat(path); err == nil {
		return nil // saved by a node that still runs
	}
	saved := map[string]string{}
	for _, k := range hostSysctls {
		v, err := os.ReadFile("/proc/sys/" + k)
		if err != nil {
			continue
		}
		saved[k] = strings.TrimSpace(string(v))
	}
	data, _ := json.Marshal(saved)
	return os.WriteFile(path, data, 0o600)
}

// restoreSysctls puts the saved values back unless another slot's node still has a state file.
func restoreSysctls(root string, slot int) error {
	others, _ := filepath.Glob(filepath.Join(root, "slot-*", "state.json"))
	for _, o := range others {
		if filepath.Base(filepath.Dir(o)) != slotDir(slot) {
			return nil
		}
	}
	data, err := os.ReadFile(sysctlFile(root))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var saved map[string]string
	if err := json.Unmarshal(data, &saved); err != nil {
		return err
	}
	var errs []error
	for k, v := range saved {
		if err := os.WriteFile("/proc/sys/"+k, []byte(v), 0o644); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		errs = append(errs, os.Remove(sysctlFile(root)))
	}
	return errors.Join(errs...)
}

func slotDir(slot int) string { return "slot-" + strconv.Itoa(slot) }
