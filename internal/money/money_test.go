package money

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAmount(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want string
	}{
		{0, "0.00"},
		{0.00005, "0.00005"},
		{0.0001, "0.0001"},
		{0.056337600000000015, "0.05634"},
		{0.5, "0.50"},
		{0.123, "0.123"},
		{0.99999, "1.00"},
		{1, "1.00"},
		{1.005, "1.005"},
		{2.5, "2.50"},
		{12.345678, "12.35"},
		{1234.5678, "1234.57"},
		{1e-12, "0.000000000001"},
		{-0.25, "-0.25"},
		{math.Inf(1), "+Inf"},
	} {
		if got := Amount(tc.in); got != tc.want {
			t.Errorf("Amount(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestUSD(t *testing.T) {
	got := []string{USD(0), USD(0.00005), USD(0.0563376), USD(2), USD(-0.1)}
	want := []string{"$0.00", "$0.00005", "$0.05634", "$2.00", "-$0.10"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("USD() mismatch (-want +got):\n%s", diff)
	}
}

// TestDistinct: a cap and a reading over it never read equal; equal ones and ones Amount tells apart are as Amount.
func TestDistinct(t *testing.T) {
	for _, tc := range []struct {
		a, b       float64
		wantA, wnB string
	}{
		{1, 1.0000001, "1.00", "1.0000001"},
		{0.5, 0.5, "0.50", "0.50"},
		{0.5, 0.51, "0.50", "0.51"},
		{2, 2.004, "2.00", "2.004"},
	} {
		a, b := Distinct(tc.a, tc.b)
		if a != tc.wantA || b != tc.wnB {
			t.Errorf("Distinct(%v, %v) = %q, %q; want %q, %q", tc.a, tc.b, a, b, tc.wantA, tc.wnB)
		}
	}
}
