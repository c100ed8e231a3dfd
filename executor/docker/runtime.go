package docker

import (
	"context"
	"fmt"
	"maps"
	"slices"

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
		problems = append(problems, fmt.Sprintf("node %s: %s", quoteList(wanted[rt]), engine.MissingRuntime(rt, available, host)))
	}
	return problems
}

// runtimePreflight asks the engine for its runtimes only when a node chooses one.
func (d *dockerEngine) runtimePreflight(ctx context.Context) []string {
	eng := d.engine
	chosen := false
	for _, np := range d.run.Plan.Nodes {
		chosen = chosen || np.Runtime != "" || (np.Container != nil && np.Container.Runtime != "")
	}
	if !chosen {
		return nil
	}
	available, _, err := eng.Runtimes(ctx)
	if err != nil {
		return []string{fmt.Sprintf("could not list the engine's container runtimes, so the isolation tier the plan chose cannot be checked: %v", err)}
	}
	return runtimeProblems(d.run.Plan.Nodes, available, eng.Host())
}
