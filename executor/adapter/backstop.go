package adapter

import (
	"time"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/planner"
)

// BackstopMargin is what BrokerEndsAt allows each attempt beyond its timeout: its clone, image pull, start,
// publication and deletion, and a clock of the proxy's that is a little ahead of kewplan's.
const BackstopMargin = 10 * time.Minute

// BrokerEndsAt is when an egress proxy stops accepting a brokered node's placeholders whatever apply tells it: the
// backstop for an apply that was killed, or could not reach the proxy, before it said the node ended. It is start
// (when the run's proxy is configured) plus the longest the run can take until the node ends for good: a node
// that is not downstream of np may hold the slots before it, so every such node counts (np's own attempts
// included) with each of its attempts at its timeout (DefaultTimeout when it has none), BackstopMargin, and the
// longest wait before a retry.
func BrokerEndsAt(p *planner.Plan, np *planner.NodePlan, start time.Time) time.Time {
	downstream := map[string]bool{}
	for changed := true; changed; {
		changed = false
		for _, n := range p.Nodes {
			if downstream[n.Name] || n.Name == np.Name {
				continue
			}
			for _, d := range n.DependsOn {
				if d == np.Name || downstream[d] {
					downstream[n.Name], changed = true, true
					break
				}
			}
		}
	}
	var bound time.Duration
	for _, n := range p.Nodes {
		if downstream[n.Name] || n.Errors {
			continue
		}
		timeout := n.Timeout
		if timeout <= 0 {
			timeout = DefaultTimeout
		}
		attempts := time.Duration(max(n.Retry.Attempts, 1))
		bound += attempts*(timeout+BackstopMargin) + (attempts-1)*config.MaxRetryBackoff
	}
	return start.Add(bound)
}
