package views

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kewplan/kewplan/executor/ledger"
)

// TestLogsCostFormatted: dollar figures in log headers, runs and meters go through the one money formatter: a
// float sum with binary noise is never printed raw, and a figure under a cent never reads as zero.
func TestLogsCostFormatted(t *testing.T) {
	noisy, tiny := 0.056337600000000015, 0.00005
	got := []string{logsCost(&noisy), logsCost(&tiny), formatCost(&tiny), meterCost(&tiny, ledger.CostProvider)}
	want := []string{"$0.05634", "$0.00005", "$0.00005", "$0.00005"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cost figures mismatch (-want +got):\n%s", diff)
	}
}

// TestRunNodeCostNamesItsMeter: a cost the proxy read from the provider is labelled as the provider's, never as
// the agent's.
func TestRunNodeCostNamesItsMeter(t *testing.T) {
	c := 0.0123
	got := []string{runNodeCost(&c, ledger.CostReported), runNodeCost(&c, ledger.CostProvider)}
	want := []string{"$0.0123 (reported by the agent)", "$0.0123 (reported by the provider, read by kewplan's proxy)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("runNodeCost() mismatch (-want +got):\n%s", diff)
	}
}
