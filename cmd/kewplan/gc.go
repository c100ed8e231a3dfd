package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// The garbage collector's settings for a short-lived CLI that builds a large parse tree and plan once and exits.
// Go's default (a collection each time the heap doubles) spends much of a large plan's time collecting, and a
// fixed memory limit is worse: once the live heap nears it, the collector runs back to back (a 20,000-node plan
// took 2.5 times as long under a 112 MiB limit as without one). So kewplan steers the collector after each
// collection, as TiDB's gctuner does: GOGC is set so that the next collection starts when the heap reaches
// heapTarget, but never before the heap has doubled (gcPercentMin, Go's default) nor after it has grown five times
// (gcPercentMax); and a memory limit of memoryLimit makes the runtime return freed pages to the system rather
// than keep them resident, raised above GOGC's goal once the live heap takes three quarters of it. A plan of
// 10,000 nodes (60–80 MB live at most) peaks at 137–139 MB resident after 11 collections, where GOGC=200 under a
// fixed 112 MiB limit made 16 (README, Performance); a larger plan grows past the target at a bounded cost.
// A GOGC or GOMEMLIMIT set in the environment wins.
const (
	heapTarget   = 110 << 20
	memoryLimit  = 120 << 20
	limitSlack   = 16 << 20 // the runtime's own memory beyond the heap: stacks, metadata, fragmentation
	gcPercentMin = 100
	gcPercentMax = 400
)

func tuneGC() {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetGCPercent(gcPercentMax)
	debug.SetMemoryLimit(memoryLimit)
	armGCTuner()
}

// gcSentinel is garbage from birth: its finalizer runs after each collection that finds it, retunes, and arms a
// new one. It holds a pointer and is larger than 16 bytes, so the tiny allocator never shares its block with a
// live object that would keep it (and its finalizer) from running.
type gcSentinel struct {
	_ *byte
	_ [16]byte
}

func armGCTuner() {
	runtime.SetFinalizer(&gcSentinel{}, func(*gcSentinel) {
		retuneGC()
		armGCTuner()
	})
}

var liveHeap = []metrics.Sample{{Name: "/gc/heap/live:bytes"}}

// retuneGC sets GOGC and the memory limit from the heap the last collection found live.
func retuneGC() {
	metrics.Read(liveHeap)
	if liveHeap[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	percent, limit := gcSettingsFor(liveHeap[0].Value.Uint64())
	debug.SetGCPercent(percent)
	debug.SetMemoryLimit(limit)
}

// gcSettingsFor is the GOGC that makes the next collection start at heapTarget after one that left live bytes,
// within [gcPercentMin, gcPercentMax], and the memory limit: memoryLimit, or, once the live heap takes three
// quarters of it (where the limit would soon force collections back to back), above GOGC's heap goal.
func gcSettingsFor(live uint64) (percent int, limit int64) {
	if live == 0 {
		return gcPercentMax, memoryLimit
	}
	l := int64(live)
	percent = int(min(max((heapTarget-l)*100/l, gcPercentMin), gcPercentMax))
	if l > memoryLimit*3/4 {
		return percent, max(memoryLimit, l+l*int64(percent)/100+limitSlack)
	}
	return percent, memoryLimit
}
