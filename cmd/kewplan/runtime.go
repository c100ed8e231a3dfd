package main

import (
	"fmt"
	"strings"

	"github.com/kewplan/kewplan/planner"
)

// refuseUnappliedRuntimes fails closed on a plan that chooses a container runtime (isolation tier) while apply
// cannot yet hand one to the engine (issue 22, phase 2: the executor sets HostConfig.Runtime and its preflight
// checks that the engine lists the runtime). Running such a node would put it on the engine's default runtime,
// runc, under a plan and a review that said gVisor: the one outcome worse than refusing.
func refuseUnappliedRuntimes(plan *planner.Plan) error {
	var nodes []string
	for _, np := range plan.Nodes {
		if np.Runtime != "" {
			nodes = append(nodes, fmt.Sprintf("%q (%s)", np.Name, planner.IsolationTier(np.Runtime)))
		}
	}
	if len(nodes) == 0 {
		return nil
	}
	return fmt.Errorf("nothing was run: a container runtime is chosen for %s, and this kewplan plans and reviews "+
		"runtimes but cannot yet start a container on one, so the node would run on the engine's default runtime "+
		"instead. Remove runtime from the sandbox and node blocks to run on the default runtime, or use a kewplan "+
		"whose apply supports runtimes", strings.Join(nodes, ", "))
}
