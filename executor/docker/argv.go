package docker

import (
	"slices"
	"strconv"

	"github.com/kewplan/kewplan/executor/engine"
	"github.com/kewplan/kewplan/planner"
)

// LabelPID names the pid of the kewplan process that started a container, so an orphan left by an apply that was
// killed can be told from one a live apply still owns. It is deliberately not a planner.Container field: a plan
// must not depend on the pid of the process that prints it. Apply adds it in two places that must agree, the
// recorded argv (AppliedArgv) and the Engine API labels, and the argv-agreement test checks they do.
const LabelPID = "kewplan.pid"

// FillContainer returns a copy of a planned container with the apply-time placeholders filled in.
func FillContainer(c *planner.Container, runID, checkout string) *planner.Container {
	out := *c
	out.RunID = runID
	out.Checkout = checkout
	out.Env = slices.Clone(c.Env)
	out.Args = slices.Clone(c.Args)
	return &out
}

// AppliedArgv is the `docker run` argv apply actually used for a filled container: the planned argv with the pid
// label inserted right after the planned labels. It is what the ledger records.
func AppliedArgv(c *planner.Container, pid int) []string {
	argv := c.Argv()
	runLabel := planner.LabelRun + "=" + c.RunID
	for i := 0; i+1 < len(argv); i++ {
		if argv[i] == "--label" && argv[i+1] == runLabel {
			return slices.Insert(argv, i+2, "--label", LabelPID+"="+strconv.Itoa(pid))
		}
	}
	return argv
}

// ApplyContainerSpec is the Engine API configuration apply uses for a filled container: ContainerConfig plus the
// pid label, agreeing exactly with AppliedArgv.
func ApplyContainerSpec(c *planner.Container, env map[string]string, pid int) (*engine.ContainerSpec, error) {
	return ApplyProxiedContainerSpec(c, env, nil, pid)
}

// ApplyProxiedContainerSpec is ApplyContainerSpec with the values of the container's proxy variables (the node's
// proxy URL, from the egress proxy apply started): engine.ProxiedContainerConfig plus the pid label.
func ApplyProxiedContainerSpec(c *planner.Container, env, proxyEnv map[string]string, pid int) (*engine.ContainerSpec, error) {
	spec, err := engine.ProxiedContainerConfig(c, env, proxyEnv)
	if err != nil {
		return nil, err
	}
	spec.Config.Labels[LabelPID] = strconv.Itoa(pid)
	return spec, nil
}
