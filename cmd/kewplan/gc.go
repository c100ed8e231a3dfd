package main

import (
	"os"
	"runtime/debug"
)

// tuneGC sets the garbage collector for a short-lived CLI, as esbuild does: kewplan allocates a large parse tree
// and plan once and exits, so collecting at twice the live heap (GOGC=200) spends less time in the collector.
// The soft limit makes it collect harder as the heap nears it. A plan of 10,000 nodes (about 60 MB live at most)
// reaches the limit while loading, so its peak resident memory is the limit plus the binary's own pages (34–40 MB
// since client-go is linked): 112 MiB holds it at 140–156 MB, mostly under 150, for about 7% more CPU time
// than 128 MiB (README, Performance). A GOGC or GOMEMLIMIT set in the environment wins.
func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(200)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(112 << 20)
	}
}
