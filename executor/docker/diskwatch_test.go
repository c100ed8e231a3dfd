package docker

import (
	"os"
	"strings"
	"testing"
	"time"
)

// TestDiskWatch: the watchdog refuses an unmet headroom up front, and kills (once, with its reason) when the free
// space falls below it while running.
func TestDiskWatch(t *testing.T) {
	dir := t.TempDir()
	avail := availableBytes(t, dir)
	if _, err := openDiskWatch(dir, avail+1<<30); err == nil || !strings.HasPrefix(err.Error(), "not started: ") {
		t.Fatalf("openDiskWatch above the free space = %v, want a not-started error", err)
	}
	w, err := openDiskWatch(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	if reason := w.check(); reason != "" {
		t.Fatalf("check with a 1-byte headroom = %q, want none", reason)
	}
	// The free space "falls" below the headroom: raise the headroom over it before the polling starts.
	w.min, w.interval = avail+1<<40, time.Millisecond
	killed := make(chan struct{})
	w.start(func() { close(killed) })
	select {
	case <-killed:
	case <-time.After(time.Minute):
		t.Fatal("the watchdog did not kill within a minute (backstop)")
	}
	reason := w.stopWatch()
	if !strings.Contains(reason, "killed by kewplan's disk watchdog") || !strings.Contains(reason, FormatBytes(w.min)) {
		t.Errorf("reason = %q", reason)
	}
	if again := w.stopWatch(); again != reason {
		t.Errorf("a second stopWatch = %q, want the same reason", again)
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 bytes", 1023: "1023 bytes", 1 << 30: "1073741824 bytes (1.0 GiB)", 3 << 19: "1572864 bytes (1.5 MiB)"} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// availableBytes is what an unprivileged writer can still use on the filesystem holding path.
func availableBytes(t testing.TB, path string) int64 {
	t.Helper()
	d, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	avail, _, err := diskSpace(d)
	if err != nil {
		t.Fatal(err)
	}
	return avail
}
