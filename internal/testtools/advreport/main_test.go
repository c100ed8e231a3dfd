package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCatalogueCoversTheChecklist: every item of the security notes' §6 appears exactly once, in order.
func TestCatalogueCoversTheChecklist(t *testing.T) {
	var want []string
	for _, sec := range []struct {
		letter string
		n      int
	}{{"A", 21}, {"B", 5}, {"C", 12}, {"D", 8}, {"E", 5}, {"F", 11}, {"G", 3}, {"H", 5}, {"I", 3}, {"J", 10}, {"K", 2}} {
		for i := 1; i <= sec.n; i++ {
			want = append(want, fmt.Sprintf("%s%d", sec.letter, i))
		}
	}
	var got []string
	for _, it := range catalogue {
		got = append(got, it.ID)
		for _, test := range it.Tests {
			if pkg, name, ok := strings.Cut(test, "."); !ok || pkg == "" || !(strings.HasPrefix(name, "Test") || strings.HasPrefix(name, "Fuzz")) {
				t.Errorf("%s: test %q is not package.TestName", it.ID, test)
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("catalogue ids (-want +got):\n%s", diff)
	}
}

// TestRender: rows and named tests combine into one result per item; no evidence at all is a failure.
func TestRender(t *testing.T) {
	rows := map[string][]row{
		"A10": {{ID: "A10", Observed: "stored equals final", Pass: true}},
		"A17": {{ID: "A17", Observed: "left behind", Pass: false, Test: "TestAdvX"}},
		"C2":  {{ID: "C2", NotTried: "not here"}},
	}
	outcomes := map[string]string{"verdict.TestCollectVerdictSymlinks": "pass", "verdict.TestCollectVerdictFIFO": "fail"}
	var b bytes.Buffer
	failed := render(&b, rows, outcomes, false)
	out := b.String()
	for _, want := range []string{"A1   PASS", "A4   FAIL", "A10  PASS", "A17  FAIL", "C2   NOT TRIED", "A20  MISSING", "TestCollectVerdictFIFO FAILED"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if failed == 0 || !strings.Contains(out, fmt.Sprintf("%d failed", failed)) {
		t.Errorf("render() = %d failed; totals line:\n%s", failed, out[strings.LastIndex(out, "\n\n"):])
	}
}
