package planner_test

import (
	"testing"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/internal/testtools/benchplan"
	"github.com/kewplan/kewplan/planner"
)

// TestForwardedWarningAtTheFirstNode: a runner whose nodes fall back to forwarded credentials is warned about
// once, at the node declared first, however the nodes' parallel planning is scheduled; otherwise a saved plan
// differs from its own re-plan and apply refuses it as edited.
func TestForwardedWarningAtTheFirstNode(t *testing.T) {
	dir := t.TempDir()
	if err := benchplan.Write(dir, "chain", 400); err != nil {
		t.Fatal(err)
	}
	cfg, diags := config.Load(dir)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	vars, diags := cfg.ResolveVariables(config.VariableInputs{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	first := -1
	for run := 0; run < 10; run++ {
		p, _ := planner.Build(cfg, planner.Inputs{Vars: vars, FS: config.DirFS(cfg.Dir)})
		var at []int
		earliest := -1
		for _, np := range p.Nodes {
			if np.Runner == "opencode" && (earliest < 0 || np.DeclRange.Start.Byte < earliest) {
				earliest = np.DeclRange.Start.Byte
			}
		}
		for _, d := range p.Diagnostics {
			if d.Summary == "Credentials forwarded, not brokered" && d.Subject != nil {
				at = append(at, d.Subject.Start.Byte)
			}
		}
		if len(at) != 1 {
			t.Fatalf("run %d: %d credentials-forwarded warnings, want 1", run, len(at))
		}
		if at[0] != earliest {
			t.Fatalf("run %d: the warning is at byte %d, want the first opencode node's declaration at byte %d", run, at[0], earliest)
		}
		if first >= 0 && at[0] != first {
			t.Fatalf("run %d: the warning moved from byte %d to %d", run, first, at[0])
		}
		first = at[0]
	}
}
