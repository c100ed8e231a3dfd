package views

import (
	"bytes"
	"testing"
)

// The apply view's hooks: the display for people, the NDJSON stream with --json; the plan and its prompt move to
// stderr with --json so that stdout carries events only.
func TestApplyViewKinds(t *testing.T) {
	var out, errOut bytes.Buffer
	s := Streams{Stdout: &out, Stderr: &errOut}
	human := NewApply(viewHuman, s)
	if hs := human.Hooks(); len(hs) != 1 {
		t.Fatalf("human hooks = %d", len(hs))
	} else if _, ok := hs[0].(*applyDisplay); !ok {
		t.Errorf("human hook is %T, want *ApplyDisplay", hs[0])
	}
	human.NothingToApply()
	js := NewApply(viewJSON, s)
	if hs := js.Hooks(); len(hs) != 1 {
		t.Fatalf("json hooks = %d", len(hs))
	} else if _, ok := hs[0].(*applyStream); !ok {
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
