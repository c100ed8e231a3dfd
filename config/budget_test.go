package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestBudgetDecode checks the decoded figures of every budget and pricing block of the valid fixture.
func TestBudgetDecode(t *testing.T) {
	cfg, diags := Load("testdata/valid-files/everything.hcl")
	if diags.HasErrors() {
		t.Fatalf("Load: %s", diags.Error())
	}
	type figures struct {
		MaxUSD           *float64
		MaxTokens, Turns *int64
		WarnAt           *float64
		ApplyMaxUSD      *float64
		In, Out, CR, CW  float64
		SandboxMaxUSD    *float64
		SandboxMaxTurns  *int64
		SandboxMaxTokens *int64
	}
	f64 := func(v float64) *float64 { return &v }
	i64 := func(v int64) *int64 { return &v }
	n := cfg.Nodes["fix"].Budget
	p := cfg.Pricing["claude-sonnet-4-5"]
	got := figures{
		MaxUSD: n.MaxUSD, MaxTokens: n.MaxTokens, Turns: n.MaxTurns, WarnAt: n.WarnAt,
		ApplyMaxUSD: cfg.Budget.MaxUSD, In: p.Input, Out: p.Output, CR: p.CacheRead, CW: p.CacheWrite,
		SandboxMaxUSD: cfg.Sandbox.Budget.MaxUSD, SandboxMaxTurns: cfg.Sandbox.Budget.MaxTurns,
		SandboxMaxTokens: cfg.Sandbox.Budget.MaxTokens,
	}
	want := figures{
		MaxUSD: f64(1.5), MaxTokens: i64(2000000), WarnAt: f64(0.8), ApplyMaxUSD: f64(20),
		In: 3, Out: 15, CR: 0.30, CW: 3.75, SandboxMaxUSD: f64(2), SandboxMaxTurns: i64(200),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("budget figures mismatch (-want +got):\n%s", diff)
	}
}

// TestPricingCacheDefaults: an unwritten cache price is charged like a fresh input token, never as free.
func TestPricingCacheDefaults(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "main.hcl", "pricing \"m\" {\n  input  = 2\n  output = 8\n}\n")
	cfg, diags := Load(path)
	if diags.HasErrors() {
		t.Fatalf("Load: %s", diags.Error())
	}
	p := cfg.Pricing["m"]
	if p.CacheRead != 2 || p.CacheWrite != 2 {
		t.Errorf("cache prices = %v/%v, want the input price 2/2", p.CacheRead, p.CacheWrite)
	}
}
