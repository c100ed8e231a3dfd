package main

import "testing"

// TestGCSettings: GOGC aims the next collection at heapTarget while the live heap is small, is held between its
// bounds, and the memory limit rises with a live heap too large for memoryLimit so that it never forces
// collections back to back.
func TestGCSettings(t *testing.T) {
	for _, tc := range []struct {
		live    uint64
		percent int
	}{
		{live: 0, percent: gcPercentMax},
		{live: 1 << 20, percent: gcPercentMax},
		{live: heapTarget / 4, percent: 300},
		{live: heapTarget / 2, percent: 100},
		{live: heapTarget, percent: gcPercentMin},
		{live: 4 * heapTarget, percent: gcPercentMin},
	} {
		percent, limit := gcSettingsFor(tc.live)
		if percent != tc.percent {
			t.Errorf("live %d MiB: GOGC %d, want %d", tc.live>>20, percent, tc.percent)
		}
		goal := int64(tc.live) + int64(tc.live)*int64(percent)/100
		if limit < memoryLimit || (int64(tc.live) > memoryLimit*3/4 && limit < goal+limitSlack) {
			t.Errorf("live %d MiB: limit %d MiB, want at least %d MiB (the base) and the heap goal %d MiB plus slack",
				tc.live>>20, limit>>20, memoryLimit>>20, goal>>20)
		}
		if int64(tc.live) <= memoryLimit*3/4 && limit != memoryLimit {
			t.Errorf("live %d MiB: limit %d MiB, want the base %d MiB", tc.live>>20, limit>>20, memoryLimit>>20)
		}
	}
}
