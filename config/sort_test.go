package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"
)

func TestSortDiagnostics(t *testing.T) {
	r := func(file string, b int) *hcl.Range {
		return &hcl.Range{Filename: file, Start: hcl.Pos{Byte: b}, End: hcl.Pos{Byte: b}}
	}
	diags := hcl.Diagnostics{
		{Summary: "b2", Subject: r("b.hcl", 2)},
		{Summary: "a9", Subject: r("a.hcl", 9)},
		{Summary: "none1"},
		{Summary: "a1", Subject: r("a.hcl", 1)},
		{Summary: "none2"},
	}
	SortDiagnostics(diags)
	var got []string
	for _, d := range diags {
		got = append(got, d.Summary)
	}
	if diff := cmp.Diff([]string{"none1", "none2", "a1", "a9", "b2"}, got); diff != "" {
		t.Errorf("SortDiagnostics() mismatch (-want +got):\n%s", diff)
	}
}
