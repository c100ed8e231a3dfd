package main

import (
	"os"
	"runtime/debug"
)

// tuneGC sets the garbage collector for a short-lived CLI, as esbuild does: kewplan allocates a large parse tree
// and plan once and exits, so collecting at twice the live heap (GOGC=200) spends less time in the collector,
// and a soft limit of 256 MiB makes it collect harder before a large configuration grows past that. A GOGC or
// GOMEMLIMIT set in the environment wins.
func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(200)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(256 << 20)
	}
}
