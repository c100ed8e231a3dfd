package executor

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kewplan/kewplan/executor/ledger"
)

// recordHook notes the events it receives.
type recordHook struct {
	NilHook
	name string
	log  *[]string
}

func (h recordHook) ApplyStart(ApplyStartEvent)   { *h.log = append(*h.log, h.name+" start") }
func (h recordHook) NodeDone(r ledger.NodeResult) { *h.log = append(*h.log, h.name+" done "+r.Node) }
func (h recordHook) ApplyDone(ApplySummary)       { *h.log = append(*h.log, h.name+" end") }

type panicHook struct{ NilHook }

func (panicHook) NodeDone(ledger.NodeResult) { panic("boom") }

// Every event reaches each hook of the options, in order; a panicking hook does not keep the event from the others.
func TestHooksInOrder(t *testing.T) {
	var log []string
	cancelled := false
	s := &syncHook{hooks: []Hook{recordHook{name: "a", log: &log}, panicHook{}, recordHook{name: "b", log: &log}},
		cancel: func() { cancelled = true }}
	s.ApplyStart(ApplyStartEvent{})
	s.NodeDone(ledger.NodeResult{Node: "fix"})
	s.ApplyDone(ApplySummary{})
	want := []string{"a start", "b start", "a done fix", "b done fix", "a end", "b end"}
	if diff := cmp.Diff(want, log); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if !cancelled || s.panic == nil {
		t.Errorf("a hook's panic did not cancel the apply (cancelled %v, panic %v)", cancelled, s.panic)
	}
	(&syncHook{}).NodeDone(ledger.NodeResult{}) // no hooks at all is fine
}
