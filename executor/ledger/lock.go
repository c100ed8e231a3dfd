package ledger

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/kewplan/kewplan/executor/statedir"
)

// ErrStateLocked is wrapped when another apply holds the state directory.
var ErrStateLocked = errors.New("state directory is locked")

// StateLock is an exclusive flock on the state directory's lock file. The kernel drops it when the process dies, so a
// crashed apply never leaves a stale lock behind: holding it proves every earlier apply on this state directory
// has ended.
type StateLock struct{ f *os.File }

// LockStateDir takes the state directory's lock (statedir.Dir.Lock), without waiting.
func LockStateDir(dir statedir.Dir) (*StateLock, error) {
	path, stateDir := dir.Lock(), dir.Root
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder := ""
		if b, rerr := os.ReadFile(path); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && pid > 0 {
				holder = fmt.Sprintf(" (pid %d)", pid)
			}
		}
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: another kewplan apply%s is using %s; wait for it to finish, or use another --state-dir", ErrStateLocked, holder, stateDir)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &StateLock{f: f}, nil
}

func (l *StateLock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	_ = l.f.Truncate(0)
	err := l.f.Close() // closing the last descriptor releases the flock
	l.f = nil
	return err
}
