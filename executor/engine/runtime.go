package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/kewplan/kewplan/planner"
)

// RuntimeFix says how to install a container runtime and register it with the engine under that name: for gVisor's
// runsc, Debian's package, the daemon.json entry with its runtimeArgs, the reload, or scripts/runsc-setup.sh.
func RuntimeFix(rt string) string {
	if rt == planner.RuntimeRunsc {
		return "Install and register gVisor as root: run scripts/runsc-setup.sh (or `make runsc-setup`), or by hand: " +
			"`apt-get install runsc` (Debian's package), add " +
			`"runtimes": {"runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=host"]}} to /etc/docker/daemon.json, ` +
			"then reload the engine (`systemctl reload docker` or `kill -HUP $(pidof dockerd)`) until `docker info` lists runsc"
	}
	return fmt.Sprintf(`Install the runtime and register it under that name in the "runtimes" of /etc/docker/daemon.json `+
		`({"runtimes": {%q: {"path": "/path/to/it"}}}), then reload the engine (`+"`systemctl reload docker`"+`) until `+
		"`docker info`"+` lists it; or choose a runtime the engine has`, rt)
}

// MissingRuntime is the refusal for a runtime the engine has not registered (available is what it has), naming
// the runtime's isolation tier and the fix. It is "" when rt is "" (the engine's default) or registered.
func MissingRuntime(rt string, available []string, host string) string {
	if rt == "" || slices.Contains(available, rt) {
		return ""
	}
	name := fmt.Sprintf("%q", rt)
	if planner.KernelIsolating(rt) {
		name = fmt.Sprintf("%q (%s)", rt, planner.IsolationTier(rt))
	}
	has := "none"
	if len(available) > 0 {
		has = strings.Join(available, ", ")
	}
	return fmt.Sprintf("the container runtime %s is not registered with the Docker Engine at %s (it has: %s); kewplan never falls back to another runtime. %s",
		name, host, has, RuntimeFix(rt))
}

// CheckRuntime returns an error saying how to register rt when the engine lacks it; nil for "" or a registered one.
func (e *Engine) CheckRuntime(ctx context.Context, rt string) error {
	if rt == "" {
		return nil
	}
	available, _, err := e.Runtimes(ctx)
	if err != nil {
		return err
	}
	if msg := MissingRuntime(rt, available, e.host); msg != "" {
		return fmt.Errorf("%s", msg)
	}
	return nil
}
