package views

import (
	"github.com/kewplan/kewplan/executor"
	"github.com/kewplan/kewplan/executor/ledger"
)

// Hooks combines hooks into one, as apply takes a single executor.Hook: every event goes to each hook, in order.
// A command view returns its hooks (the live display, or the NDJSON stream); what records a run to the ledger is
// not among them: the executor does that itself, fail-closed, whatever the hooks do.
func Hooks(hooks ...executor.Hook) executor.Hook {
	if len(hooks) == 1 {
		return hooks[0]
	}
	return multiHook(hooks)
}

type multiHook []executor.Hook

var _ executor.Hook = multiHook(nil)

func (m multiHook) ApplyStart(e executor.ApplyStartEvent) {
	for _, h := range m {
		h.ApplyStart(e)
	}
}

func (m multiHook) NodeStart(e executor.NodeStartEvent) {
	for _, h := range m {
		h.NodeStart(e)
	}
}

func (m multiHook) NodeProgress(e executor.NodeProgressEvent) {
	for _, h := range m {
		h.NodeProgress(e)
	}
}

func (m multiHook) NodeDone(r ledger.NodeResult) {
	for _, h := range m {
		h.NodeDone(r)
	}
}

func (m multiHook) NodeRetry(e executor.NodeRetryEvent) {
	for _, h := range m {
		h.NodeRetry(e)
	}
}

func (m multiHook) Warning(e executor.WarningEvent) {
	for _, h := range m {
		h.Warning(e)
	}
}

func (m multiHook) BudgetWarning(e executor.BudgetWarningEvent) {
	for _, h := range m {
		h.BudgetWarning(e)
	}
}

func (m multiHook) ApplyDone(s executor.ApplySummary) {
	for _, h := range m {
		h.ApplyDone(s)
	}
}
