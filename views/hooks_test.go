package views

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kewplan/kewplan/executor"
	"github.com/kewplan/kewplan/executor/ledger"
)

// recordHook notes the events it receives.
type recordHook struct {
	executor.NilHook
	name string
	log  *[]string
}

func (h recordHook) ApplyStart(executor.ApplyStartEvent) { *h.log = append(*h.log, h.name+" start") }
func (h recordHook) NodeDone(r ledger.NodeResult)        { *h.log = append(*h.log, h.name+" done "+r.Node) }
func (h recordHook) ApplyDone(executor.ApplySummary)     { *h.log = append(*h.log, h.name+" end") }

// Hooks hands every event to each hook, in order; one hook is returned as it is.
func TestHooksCompose(t *testing.T) {
	var log []string
	a, b := recordHook{name: "a", log: &log}, recordHook{name: "b", log: &log}
	h := Hooks(a, b)
	h.ApplyStart(executor.ApplyStartEvent{})
	h.NodeDone(ledger.NodeResult{Node: "fix"})
	h.ApplyDone(executor.ApplySummary{})
	want := []string{"a start", "b start", "a done fix", "b done fix", "a end", "b end"}
	if diff := cmp.Diff(want, log); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if Hooks(a) != executor.Hook(a) {
		t.Error("Hooks of one hook wraps it")
	}
}

// The apply view's hooks: the display for people, the NDJSON stream with --json; the plan and its prompt move to
// stderr with --json so that stdout carries events only.
func TestApplyViewKinds(t *testing.T) {
	var out, errOut bytes.Buffer
	s := Streams{Stdout: &out, Stderr: &errOut}
	human := NewApply(ViewHuman, s)
	if hs := human.Hooks(); len(hs) != 1 {
		t.Fatalf("human hooks = %d", len(hs))
	} else if _, ok := hs[0].(*ApplyDisplay); !ok {
		t.Errorf("human hook is %T, want *ApplyDisplay", hs[0])
	}
	human.NothingToApply()
	js := NewApply(ViewJSON, s)
	if hs := js.Hooks(); len(hs) != 1 {
		t.Fatalf("json hooks = %d", len(hs))
	} else if _, ok := hs[0].(*ApplyStream); !ok {
		t.Errorf("json hook is %T, want *ApplyStream", hs[0])
	}
	js.ApprovalPrompt(2)
	human.Close()
	js.Close()
	if got, want := out.String(), "Nothing to apply: the configuration declares no nodes.\n"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
	if got, want := errOut.String(), "\nkewplan will run 2 nodes as shown above. Only 'yes' will be accepted to approve.\n\n  Enter a value: "; got != want {
		t.Errorf("stderr = %q, want %q", got, want)
	}
}
