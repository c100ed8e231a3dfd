package docker

import (
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The disk watchdog (security checklist C10). An agent writes into its checkout through a bind mount, and Docker
// offers no quota for a bind mount: an agent that writes without end fills the filesystem holding kewplan's state
// directory, which is the host's. While a node's container runs, kewplan reads that filesystem's free space with
// fstatfs (never walking the agent's tree) and kills the container once the free space falls below a headroom;
// the node then fails closed. The same check runs once before the container is created, so a node never starts on
// a filesystem that is already short of space.

// DefaultMinFreeFloor and DefaultMinFreePercent make the default headroom (ApplyOptions.MinFreeBytes = 0): the
// larger of 1 GiB and 5% of the filesystem holding the checkout. The headroom also absorbs what an agent writes
// between two polls.
const (
	DefaultMinFreeFloor   int64 = 1 << 30
	DefaultMinFreePercent       = 5
)

// diskPollInterval is how often the watchdog reads the free space while a container runs: fstatfs costs
// microseconds, and an agent writing through the page cache can fill about 1 GB/s, so the poll is kept short for
// the headroom to absorb what is written between two readings.
const diskPollInterval = 250 * time.Millisecond

// diskWatch keeps one node's checkout filesystem above its headroom while the node's container runs.
type diskWatch struct {
	dir      *os.File // the checkout, opened before the container starts: fstatfs follows no path the agent can change
	path     string   // the checkout, for messages
	min      int64    // the headroom, bytes
	source   string   // where min came from, for messages
	interval time.Duration

	mu     sync.Mutex
	reason string // set once, when the watchdog killed the container
	stop   chan struct{}
	done   chan struct{}
}

// diskSpace returns the bytes an unprivileged writer (the agent runs as uid 1001) can still use on the filesystem
// of an open file, and the filesystem's size.
func diskSpace(f *os.File) (avail, size int64, err error) {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return 0, 0, err
	}
	bs := int64(st.Bsize)
	return int64(st.Bavail) * bs, int64(st.Blocks) * bs, nil
}

// openDiskWatch opens the checkout, settles the headroom (minFree, or the default when 0) and checks it once. An
// error means the node must not start: the headroom is already unmet, or the free space cannot be read.
func openDiskWatch(checkout string, minFree int64) (*diskWatch, error) {
	dir, err := os.Open(checkout)
	if err != nil {
		return nil, fmt.Errorf("not started: open the checkout to watch its filesystem's free space: %v", err)
	}
	avail, size, err := diskSpace(dir)
	if err != nil {
		dir.Close()
		return nil, fmt.Errorf("not started: kewplan cannot read the free space of the filesystem holding the checkout %s (%v), so it could not stop an agent that fills it", checkout, err)
	}
	w := &diskWatch{dir: dir, path: checkout, min: minFree, interval: diskPollInterval}
	if minFree > 0 {
		w.source = "the headroom asked for with --min-free"
	} else {
		w.min = max(DefaultMinFreeFloor, size/100*DefaultMinFreePercent)
		w.source = fmt.Sprintf("the default headroom, the larger of 1 GiB and %d%% of the filesystem's %s", DefaultMinFreePercent, FormatBytes(size))
	}
	if avail < w.min {
		dir.Close()
		return nil, fmt.Errorf("not started: the filesystem holding the checkout %s has %s available, below the %s kewplan keeps free while an agent runs (%s); free at least %s there and apply again",
			checkout, FormatBytes(avail), FormatBytes(w.min), w.source, FormatBytes(w.min-avail))
	}
	return w, nil
}

// start polls the free space until stopWatch; the first reading below the headroom (or a failed reading: the
// watchdog fails closed) records the reason and calls kill once.
func (w *diskWatch) start(kill func()) {
	w.stop, w.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(w.done)
		tick := time.NewTicker(w.interval)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			reason := w.check()
			if reason == "" {
				continue
			}
			w.mu.Lock()
			w.reason = reason
			w.mu.Unlock()
			kill()
			return
		}
	}()
}

// check reads the free space once and returns why the container must die, or "".
func (w *diskWatch) check() string {
	avail, _, err := diskSpace(w.dir)
	if err != nil {
		return fmt.Sprintf("killed by kewplan's disk watchdog: the free space of the filesystem holding the checkout %s could not be read (%v), and an agent that may be filling the disk is never left running unwatched", w.path, err)
	}
	if avail >= w.min {
		return ""
	}
	return fmt.Sprintf("killed by kewplan's disk watchdog: the filesystem holding the checkout %s fell to %s available, below the %s kewplan keeps free (%s); something, most likely the agent through its bind-mounted checkout, was filling the disk. If the task really needs that much room, free space on that filesystem (%s more would have met the headroom) and apply again",
		w.path, FormatBytes(avail), FormatBytes(w.min), w.source, FormatBytes(w.min-avail))
}

// stopWatch ends the polling, waits for it, and closes the checkout. It returns the kill's reason, or "".
func (w *diskWatch) stopWatch() string {
	if w.stop != nil {
		close(w.stop)
		<-w.done
		w.stop = nil
	}
	if w.dir != nil {
		w.dir.Close()
		w.dir = nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.reason
}

// FormatBytes shows a byte count exactly and in binary units: "1073741824 bytes (1.0 GiB)".
func FormatBytes(n int64) string {
	const unit = 1 << 10
	if n < unit && n > -unit {
		return fmt.Sprintf("%d bytes", n)
	}
	f, suffix := float64(n), "B"
	for _, s := range []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"} {
		f /= unit
		suffix = s
		if f < unit && f > -unit {
			break
		}
	}
	return fmt.Sprintf("%d bytes (%.1f %s)", n, f, suffix)
}
