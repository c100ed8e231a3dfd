package ledger

import (
	"bytes"
	"os"
	"strconv"
	"strings"
)

// Process identifies an apply's process well enough to tell later, on the same machine, whether it still runs:
// the host's name, the kernel's boot id, the pid and the process's start time in clock ticks since boot (field 22
// of /proc/PID/stat). A pid alone is not enough: pids are reused, and a reboot reuses them all.
type Process struct {
	Host   string
	BootID string
	PID    int
	Start  uint64
}

// CurrentProcess is this process's identity; the boot id and start time are empty where /proc does not say them.
func CurrentProcess() Process {
	p := Process{PID: os.Getpid(), BootID: bootID()}
	p.Host, _ = os.Hostname()
	p.Start, _ = processStart(p.PID)
	return p
}

// Alive reports whether p still runs: on this host and boot, a process with its pid and the same start time. An
// identity recorded elsewhere (another host sharing the state directory, a ledger written before identities
// were recorded) is never called alive: the state directory's lock, which the kernel drops when its holder dies,
// is then the only proof, and the caller already holds it.
func (p Process) Alive() bool {
	if p.PID <= 0 || p.Start == 0 || p.BootID == "" {
		return false
	}
	if host, _ := os.Hostname(); host != p.Host || bootID() != p.BootID {
		return false
	}
	start, ok := processStart(p.PID)
	return ok && start == p.Start
}

func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// processStart reads a process's start time (clock ticks since boot) from /proc/PID/stat. The command name in
// parentheses may hold spaces and parentheses of its own, so the fields are counted from its last ')'.
func processStart(pid int) (uint64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	fields := strings.Fields(string(b[i+1:]))
	// fields[0] is field 3 (state); the start time is field 22.
	if len(fields) < 20 {
		return 0, false
	}
	start, err := strconv.ParseUint(fields[19], 10, 64)
	return start, err == nil
}
