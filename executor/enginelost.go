package executor

import (
	"fmt"
	"strings"

	"github.com/kewplan/kewplan/executor/adapter"
	"github.com/kewplan/kewplan/executor/ledger"
)

// When the engine stops answering for good.
//
// An engine that lost its connection and did not get it back within its reconnect bound (adapter.LossReporter;
// Docker: executor/engine's reconnect.go) ends the apply without hanging and without guessing: the attempts that
// were running end interrupted (neither failed nor succeeded: their agents may still run), their work kept from
// the checkouts on this host by the engine as for any stopped worker, the checkouts left for the next command to
// sweep once it has stopped their containers; no node starts any more, no attempt is retried, and the run ends
// interrupted, to be continued with apply --resume once the engine answers again.

// notStartedEngineLost is the reason of a node the apply did not start because its engine was lost.
const notStartedEngineLost = "not started: the engine stopped answering"

// engineLost is the apply's engine's loss, or nil while it answers (or cannot lose its connection).
func (a *applier) engineLost() error {
	if r, ok := a.engine.(adapter.LossReporter); ok {
		return r.Lost()
	}
	return nil
}

// endEngineLost marks the run interrupted when its engine was lost, and says what happened and what to do.
func (a *applier) endEngineLost(sum *ApplySummary) {
	lost := a.engineLost()
	if lost == nil {
		return
	}
	sum.Status = ledger.RunInterrupted
	var interrupted, kept, notStarted []string
	for _, n := range sum.Nodes {
		switch {
		case n.Status == ledger.StatusInterrupted:
			interrupted = append(interrupted, n.Node)
			if n.Salvage != nil {
				kept = append(kept, fmt.Sprintf("%s (%s)", n.Node, n.Salvage.Summary()))
			}
		case n.Status == ledger.StatusSkipped && n.Reason == notStartedEngineLost:
			notStarted = append(notStarted, n.Node)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%v; the apply ended", lost)
	if len(interrupted) > 0 {
		fmt.Fprintf(&b, ": interrupted nodes: %s", strings.Join(interrupted, ", "))
	}
	if len(notStarted) > 0 {
		fmt.Fprintf(&b, "; not started: %s", strings.Join(notStarted, ", "))
	}
	if len(kept) > 0 {
		fmt.Fprintf(&b, "; kept the work of %s (publish it with `kewplan salvage %s NODE`)", strings.Join(kept, ", "), sum.RunID)
	}
	fmt.Fprintf(&b, "; once the engine answers again, continue the run with `kewplan apply --resume latest` (it is run %s): its containers are stopped and swept, the nodes that succeeded reused",
		sum.RunID)
	a.warn("", b.String())
}
