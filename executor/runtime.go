package executor

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kewplan/kewplan/executor/engine"
	"github.com/kewplan/kewplan/planner"
)

// runtimeProblems is preflight's check of the isolation tiers: every runtime a node's plan chooses must be one the
// engine has registered, because a container the engine cannot start on that runtime must never run on another
// (runc) under a plan and a review that said gVisor. available are the engine's runtimes (`docker info`).
func runtimeProblems(nodes []*planner.NodePlan, available []string, host string) []string {
	wanted := map[string][]string{}
	for _, np := range nodes {
		rt := np.Runtime
		if np.Container != nil && np.Container.Runtime != "" {
			rt = np.Container.Runtime
		}
		if rt != "" && !slices.Contains(available, rt) {
			wanted[rt] = append(wanted[rt], np.Name)
		}
	}
	var problems []string
	for _, rt := range slices.Sorted(maps.Keys(wanted)) {
		has := "none"
		if len(available) > 0 {
			has = strings.Join(available, ", ")
		}
		name := fmt.Sprintf("%q", rt)
		if planner.KernelIsolating(rt) {
			name = fmt.Sprintf("%q (%s)", rt, planner.IsolationTier(rt))
		}
		problems = append(problems, fmt.Sprintf("node %s: the container runtime %s is not registered with the Docker Engine at %s (it has: %s); kewplan never falls back to another runtime. %s",
			quoteList(wanted[rt]), name, host, has, runtimeFix(rt)))
	}
	return problems
}

// runtimeFix says how to install and register a runtime with the engine.
func runtimeFix(rt string) string {
	if rt == planner.RuntimeRunsc {
		return `Install and register gVisor as root: run scripts/runsc-setup.sh (or ` + "`make runsc-setup`" + `), or by hand: ` +
			"`apt-get install runsc` (Debian's package), add " +
			`"runtimes": {"runsc": {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=host"]}} to /etc/docker/daemon.json, ` +
			"then reload the engine (`systemctl reload docker` or `kill -HUP $(pidof dockerd)`) until `docker info` lists runsc"
	}
	return fmt.Sprintf(`Install the runtime and register it under that name in the "runtimes" of /etc/docker/daemon.json `+
		`({"runtimes": {%q: {"path": "/path/to/it"}}}), then reload the engine (`+"`systemctl reload docker`"+`) until `+
		"`docker info`"+` lists it; or choose a runtime the engine has`, rt)
}

// runtimePreflight asks the engine for its runtimes only when a node chooses one.
func (a *applier) runtimePreflight(ctx context.Context, eng *engine.Engine) []string {
	chosen := false
	for _, np := range a.opts.Plan.Nodes {
		chosen = chosen || np.Runtime != "" || (np.Container != nil && np.Container.Runtime != "")
	}
	if !chosen {
		return nil
	}
	available, _, err := eng.Runtimes(ctx)
	if err != nil {
		return []string{fmt.Sprintf("could not list the engine's container runtimes, so the isolation tier the plan chose cannot be checked: %v", err)}
	}
	return runtimeProblems(a.opts.Plan.Nodes, available, eng.Host())
}
