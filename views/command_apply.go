package views

import (
	"fmt"
	"io"

	"github.com/hashicorp/hcl/v2"

	"github.com/kewplan/kewplan/executor"
	"github.com/kewplan/kewplan/internal/termsafe"
	"github.com/kewplan/kewplan/jsonplan"
)

// Apply is the view of `kewplan apply`: the plan it is about to run, the approval prompt, preflight's refusal,
// interrupts, and the hooks that show the run's progress.
type Apply interface {
	Diagnostics(diags hcl.Diagnostics, files ...map[string][]byte)
	// Plan shows the plan about to be applied.
	Plan(doc *jsonplan.Document) error
	// SavedPlan names the saved plan about to be applied (its nodes were shown when it was made).
	SavedPlan(path string, nodes int, configDigest string)
	PlanHasErrors()
	NothingToApply()
	// ApprovalPrompt asks for a 'yes'; Approved and Cancelled close the prompt.
	ApprovalPrompt(nodes int)
	Approved()
	Cancelled()
	// Hooks are what shows the run's progress (the live display, or the NDJSON stream); pass them to apply
	// combined by Hooks. Close stops any refresh they run.
	Hooks() []executor.Hook
	Close()
	PreflightFailed(problems []string)
	Interrupted()
	InterruptedAgain()
	CleanupFailed(err error)
}

// NewApply returns apply's view: human (the plan and progress on stdout, live on a terminal) or JSON (NDJSON
// events on stdout; the plan and the prompt go to stderr so that stdout stays machine-readable).
func NewApply(vt ViewType, s Streams) Apply {
	if vt == viewJSON {
		return &applyJSON{applyCommon{View: NewView(s), planOut: s.Stderr}, newApplyStream(s.Stdout)}
	}
	return &applyHuman{applyCommon{View: NewView(s), planOut: s.Stdout}, newApplyDisplay(s.Stdout, s.Terminal, s.Color)}
}

// applyCommon is what both kinds of apply view print the same way, differing only in where the plan goes.
type applyCommon struct {
	*View
	planOut io.Writer // the plan, the prompt and their notes
}

func (v *applyCommon) Plan(doc *jsonplan.Document) error { return WritePlanHuman(v.planOut, doc) }

func (v *applyCommon) SavedPlan(path string, nodes int, configDigest string) {
	fmt.Fprintf(v.planOut, "Applying the saved plan %s: %s, config digest %s (unchanged since it was saved).\n",
		path, count(nodes, "node", "nodes"), configDigest)
}

func (v *applyCommon) PlanHasErrors() {
	fmt.Fprintln(v.streams.Stderr, "The plan has errors: nothing was applied.")
}

func (v *applyCommon) NothingToApply() {
	fmt.Fprintln(v.planOut, "Nothing to apply: the configuration declares no nodes.")
}

func (v *applyCommon) ApprovalPrompt(nodes int) {
	fmt.Fprintf(v.planOut, "\nkewplan will run %d %s as shown above. Only 'yes' will be accepted to approve.\n\n  Enter a value: ",
		nodes, plural(nodes, "node", "nodes"))
}

func (v *applyCommon) Approved() { fmt.Fprintln(v.planOut) }

func (v *applyCommon) Cancelled() { fmt.Fprintln(v.planOut, "\nApply cancelled: nothing was run.") }

func (v *applyCommon) PreflightFailed(problems []string) {
	fmt.Fprintf(v.streams.Stderr, "Error: nothing was run; preflight found %s:\n", count(len(problems), "problem", "problems"))
	for _, p := range problems {
		fmt.Fprintf(v.streams.Stderr, "  - %s\n", termsafe.Flatten(p))
	}
}

func (v *applyCommon) Interrupted() {
	fmt.Fprintln(v.streams.Stderr, "\nInterrupted: starting nothing new; killing and removing the running containers. Interrupt again to exit at once.")
}

func (v *applyCommon) InterruptedAgain() {
	fmt.Fprintln(v.streams.Stderr, "Interrupted again: a last cleanup attempt, then exiting.")
}

func (v *applyCommon) CleanupFailed(err error) {
	fmt.Fprintf(v.streams.Stderr, "Cleanup failed: %s\n", termsafe.Flatten(err.Error()))
}

type applyHuman struct {
	applyCommon
	display *applyDisplay
}

func (v *applyHuman) Hooks() []executor.Hook { return []executor.Hook{v.display} }
func (v *applyHuman) Close()                 { v.display.Close() }

type applyJSON struct {
	applyCommon
	stream *applyStream
}

func (v *applyJSON) Hooks() []executor.Hook { return []executor.Hook{v.stream} }
func (v *applyJSON) Close()                 {}
