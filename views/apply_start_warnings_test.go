package views

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kewplan/kewplan/executor"
)

// TestApplyStartWarnings: preflight's findings about the environment arrive with the run's start; every view shows
// them, sanitised (they quote engine-reported versions and network names).
func TestApplyStartWarnings(t *testing.T) {
	e := executor.ApplyStartEvent{RunID: "r1", Nodes: []string{"a"}, Parallelism: 1, Time: applyT0,
		Warnings: []string{"runc is 1.1.5, older than 1.1.12", "network \"n\x1b[2J\" gives this host an address"}}
	var plain bytes.Buffer
	newApplyDisplay(&plain, false, false).ApplyStart(e)
	want := "Applying run r1: 1 node, at most 1 at once.\nWarning: runc is 1.1.5, older than 1.1.12\nWarning: network \"n\\x1b[2J\" gives this host an address\n"
	if diff := cmp.Diff(want, plain.String()); diff != "" {
		t.Errorf("plain view (-want +got):\n%s", diff)
	}
	var js bytes.Buffer
	newApplyStream(&js).ApplyStart(e)
	var ev struct {
		Type     string   `json:"type"`
		Warnings []string `json:"warnings"`
	}
	if err := json.Unmarshal(js.Bytes(), &ev); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"runc is 1.1.5, older than 1.1.12", "network \"n[2J\" gives this host an address"}, ev.Warnings); diff != "" || ev.Type != "apply_start" {
		t.Errorf("apply_start %q warnings (-want +got):\n%s", ev.Type, diff)
	}
	js.Reset()
	e.Warnings = nil
	newApplyStream(&js).ApplyStart(e)
	if strings.Contains(js.String(), "warnings") {
		t.Errorf("an apply_start without warnings carries the key: %s", js.String())
	}
}
