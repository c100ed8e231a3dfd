package runners

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPriceLookup(t *testing.T) {
	table := BuiltinPriceTable()
	table.Override("local-qwen", Price{}, "main.hcl:40")
	table.Override("claude-haiku-4-5", Price{Input: 2, Output: 10, CacheRead: 2, CacheWrite: 2}, "main.hcl:44")
	tests := []struct {
		model  string
		want   PriceEntry
		wantOK bool
	}{
		{"claude-sonnet-4-5", PriceEntry{"claude-sonnet-4-5", Price{3, 15, 0.30, 3.75}, "builtin"}, true},
		{"claude-sonnet-4-5-20250929", PriceEntry{"claude-sonnet-4-5", Price{3, 15, 0.30, 3.75}, "builtin"}, true},
		{"openrouter/anthropic/claude-sonnet-4.5", PriceEntry{"anthropic/claude-sonnet-4.5", Price{3, 15, 0.30, 3.75}, "builtin"}, true},
		{"claude-opus-4-5", PriceEntry{"claude-opus-4-5", Price{5, 25, 0.50, 6.25}, "builtin"}, true},
		{"claude-opus-4-1", PriceEntry{"claude-opus-4-1", Price{15, 75, 1.50, 18.75}, "builtin"}, true},
		{"claude-haiku-4-5", PriceEntry{"claude-haiku-4-5", Price{2, 10, 2, 2}, "main.hcl:44"}, true},
		{"local-qwen", PriceEntry{"local-qwen", Price{}, "main.hcl:40"}, true},
		{"gpt-unknown", PriceEntry{}, false},
	}
	for _, tt := range tests {
		got, ok := table.Lookup(tt.model)
		if ok != tt.wantOK {
			t.Errorf("Lookup(%q) ok = %v, want %v", tt.model, ok, tt.wantOK)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Lookup(%q) mismatch (-want +got):\n%s", tt.model, diff)
		}
	}
	// The override did not leak into the built-in table.
	if e, _ := BuiltinPriceTable().Lookup("claude-haiku-4-5"); e.Price.Input != 1 {
		t.Errorf("built-in haiku input = %v, want 1", e.Price.Input)
	}
}

// TestPriceCost is the figure: 100,000 input and 20,000 output tokens of claude-sonnet-4-5 cost 0.60 USD.
func TestPriceCost(t *testing.T) {
	e, _ := BuiltinPriceTable().Lookup("claude-sonnet-4-5")
	if got := e.Price.Cost(100000, 20000, 0, 0); got < 0.6-1e-12 || got > 0.6+1e-12 {
		t.Errorf("Cost = %v, want 0.60", got)
	}
}

func TestReportsCostLive(t *testing.T) {
	got := map[string]bool{}
	for _, p := range append(Protocols(), "lemonade") {
		got[p] = ReportsCostLive(p)
	}
	want := map[string]bool{"claude-code": false, "hermes": false, "opencode": true, "pi": true, "lemonade": true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ReportsCostLive mismatch (-want +got):\n%s", diff)
	}
}
