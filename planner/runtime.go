package planner

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"

	"github.com/kewplan/kewplan/config"
)

// A node's runtime is its isolation tier: "" is the engine's default runtime (runc, which shares the host kernel
// with the agent, so one kernel bug is a way out), and a runtime such as gVisor's "runsc" puts a user-space kernel
// between the agent and the host. The planner only records the choice: the argv shows `--runtime NAME`, every view
// names the tier, `kewplan diff` judges a move between tiers (widening-runtime) and the policy's required_runtime
// demands one. Whether the engine has the runtime is the executor's preflight question.

// RuntimeRunsc is gVisor's runtime as Debian's runsc package and scripts/runsc-setup.sh register it.
const RuntimeRunsc = "runsc"

// kernelIsolating are the runtimes known to put a kernel of their own (gVisor's user-space kernel, or a Kata VM's)
// between the agent and the host, with the name each tier is shown under.
var kernelIsolating = map[string]string{
	"runsc":                  "gVisor",
	"io.containerd.runsc.v1": "gVisor",
	"kata":                   "Kata Containers",
	"kata-runtime":           "Kata Containers",
	"kata-qemu":              "Kata Containers",
	"kata-fc":                "Kata Containers",
	"kata-clh":               "Kata Containers",
	"io.containerd.kata.v2":  "Kata Containers",
}

// KernelIsolating reports whether runtime is one kewplan knows to give the container a kernel of its own.
func KernelIsolating(runtime string) bool {
	_, ok := kernelIsolating[runtime]
	return ok
}

// IsolationTier names a runtime for people: "gVisor (runsc)", "runc (engine default)", or the runtime's own name
// for one kewplan does not know (e.g. "crun").
func IsolationTier(runtime string) string {
	switch {
	case runtime == "":
		return "runc (engine default)"
	case kernelIsolating[runtime] != "":
		return fmt.Sprintf("%s (%s)", kernelIsolating[runtime], runtime)
	}
	return runtime
}

// planRuntime sets the node's runtime: its own runtime attribute, else the sandbox's, else the engine's default.
func (b *builder) planRuntime(e *nodeEval, n *config.Node, nv *config.NodeValues) {
	switch e.attrState("runtime", n.Runtime) {
	case evalAbsent:
		e.np.Runtime = b.cfg.Sandbox.Runtime
	case evalKnown:
		e.np.Runtime = nv.Runtime
	case evalUnknown:
		e.diags = append(e.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Runtime not known at plan time",
			Subject: rangePtr(n.Runtime.Range()),
			Detail: fmt.Sprintf("The runtime of node %q depends on a value known only after apply, so its isolation tier "+
				"cannot be reviewed before it runs. Name the runtime directly, such as runtime = %q.", n.Name, RuntimeRunsc)})
	}
}
