package runners

import (
	"syscall"
	"time"
)

// cpuTime is the process's user+system CPU time: on a shared machine, throughput per CPU second is the figure
// that does not depend on what else is running.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
