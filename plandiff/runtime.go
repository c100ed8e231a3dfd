package plandiff

import (
	"fmt"

	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/planner"
)

// nodeRuntime is the runtime a node's container runs on. The argv is what apply runs, so a readable argv decides
// (its last --runtime, as docker reads it; none: the engine's default); the document's runtime field serves a node
// without argv. A plan file is input, and the two could disagree only in a hand-edited one.
func nodeRuntime(n *jsonplan.NodeDocument) string {
	if len(n.Argv) > 0 {
		if run := parseDockerRun(n.Argv); run.Parsed {
			runtime := ""
			for _, o := range run.Options {
				if o.Name == "--runtime" {
					runtime = o.Value
				}
			}
			return runtime
		}
	}
	return n.Runtime
}

// compareRuntime judges a move between isolation tiers. Moving onto a runtime that gives the container a kernel of
// its own (gVisor, Kata) narrows; every other move widens, because kewplan cannot show the new runtime isolates no
// less: leaving gVisor for runc puts the agent back on the host's kernel, and a move between two runtimes kewplan
// does not know (or from the engine's default, whatever the engine was set to, to a named one) is unverifiable.
func compareRuntime(b, h *jsonplan.NodeDocument) *Finding {
	br, hr := nodeRuntime(b), nodeRuntime(h)
	if br == hr {
		return nil
	}
	bt, ht := planner.IsolationTier(br), planner.IsolationTier(hr)
	f := &Finding{Kind: KindRuntimeWidened, Widening: true, Node: h.Name, Range: nodeRange(h)}
	switch {
	case planner.KernelIsolating(hr) && !planner.KernelIsolating(br):
		f.Kind, f.Widening = KindRuntimeNarrowed, false
		f.Message = fmt.Sprintf("Node %q moved from %s to %s: a kernel of its own now stands between its agent and the host.", h.Name, bt, ht)
	case planner.KernelIsolating(br) && !planner.KernelIsolating(hr):
		f.Message = fmt.Sprintf("Node %q moved from %s to %s: its agent now shares the host's kernel%s.", h.Name, bt, ht, credentialNote(h))
	case planner.KernelIsolating(br):
		f.Message = fmt.Sprintf("Node %q moved from %s to %s, another kernel boundary that kewplan cannot show to be no weaker.", h.Name, bt, ht)
	default:
		f.Message = fmt.Sprintf("Node %q moved from %s to %s, a runtime kewplan cannot show to isolate no less.", h.Name, bt, ht)
	}
	return f
}
