//go:build unix

package safefile

import (
	"errors"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// openFlags opens for reading without blocking: O_NONBLOCK makes open(2) on a FIFO without a writer return at
// once, O_NOCTTY keeps a terminal device from becoming the controlling terminal.
func openFlags(opts Options) int {
	flags := os.O_RDONLY | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC
	if opts.NoFollow {
		flags |= unix.O_NOFOLLOW
	}
	return flags
}

func openNonBlocking(path string, opts Options) (*os.File, error) {
	var fd int
	var err error
	for {
		fd, err = unix.Open(path, openFlags(opts), 0)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	// os.NewFile on a raw descriptor keeps it out of the runtime poller: reads are plain blocking reads, which is
	// what a regular file wants once O_NONBLOCK is cleared.
	return os.NewFile(uintptr(fd), path), nil
}

// clearNonBlock turns O_NONBLOCK off once f is known to be a regular file, so reads behave as usual.
func clearNonBlock(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var opErr error
	err = rc.Control(func(fd uintptr) {
		flags, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		if err != nil {
			opErr = err
			return
		}
		if flags&unix.O_NONBLOCK != 0 {
			_, opErr = unix.FcntlInt(fd, unix.F_SETFL, flags&^unix.O_NONBLOCK)
		}
	})
	if err != nil {
		return err
	}
	return opErr
}

// isLoopError reports the error open(2) gives for a symbolic link under O_NOFOLLOW.
func isLoopError(err error) bool { return errors.Is(err, syscall.ELOOP) }
