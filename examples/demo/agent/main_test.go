package main

import (
	"strings"
	"testing"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/planner"
)

// TestDemoConfigPlans: the demo configuration plans with no error (its one warning: a local image has no digest).
func TestDemoConfigPlans(t *testing.T) {
	cfg, diags := config.Load("..")
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	p, diags := planner.Build(cfg, planner.Inputs{FS: config.DirFS(cfg.Dir)})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if len(p.Nodes) != 2 || p.Nodes[0].Name != "hello" || p.Nodes[1].Name != "review" {
		t.Fatalf("nodes: %+v", p.Nodes)
	}
	for _, d := range diags {
		if !strings.Contains(d.Summary, "not pinned") {
			t.Errorf("unexpected diagnostic: %s: %s", d.Summary, d.Detail)
		}
	}
}
