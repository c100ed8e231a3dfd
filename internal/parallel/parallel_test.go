package parallel

import (
	"sync/atomic"
	"testing"
)

// TestForCallsEveryIndexOnce: every index in [0, n) is handed out exactly once, for lists shorter and longer than
// a run.
func TestForCallsEveryIndexOnce(t *testing.T) {
	for _, n := range []int{0, 1, 63, 64, 65, 1000} {
		calls := make([]atomic.Int32, n)
		For(n, func(i int) { calls[i].Add(1) })
		for i := range calls {
			if got := calls[i].Load(); got != 1 {
				t.Errorf("n=%d: index %d called %d times, want 1", n, i, got)
			}
		}
	}
}
