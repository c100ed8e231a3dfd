package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// ErrNotRegular is wrapped by the error for anything that is not a regular file (FIFO, device, socket,
// directory, symbolic link when NoFollow is set).
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is wrapped by the error for a file over the caller's size limit.
var ErrTooLarge = errors.New("file too large")

// Options change how a file is opened.
type Options struct {
	// NoFollow refuses a symbolic link as the last element of the path instead of following it.
	NoFollow bool
}

// Error is a refused file: Path as given, and Reason, a sentence fragment ("is a named pipe (FIFO)").
type Error struct {
	Path   string
	Reason string
	Err    error // ErrNotRegular or ErrTooLarge
}

func (e *Error) Error() string { return e.Path + " " + e.Reason }
func (e *Error) Unwrap() error { return e.Err }

// Read returns the content of the regular file at path, refusing without blocking anything else, and refusing a
// file of more than limit bytes (limit <= 0: no limit). Other errors are *fs.PathError from the open.
func Read(path string, limit int64) ([]byte, error) { return ReadWith(path, limit, Options{}) }

// ReadWith is Read with options.
func ReadWith(path string, limit int64, opts Options) ([]byte, error) {
	f, err := openNonBlocking(path, opts)
	if err != nil {
		if opts.NoFollow && isLoopError(err) {
			return nil, &Error{Path: path, Reason: "is a symbolic link, which is not followed here", Err: ErrNotRegular}
		}
		// open(2) fails on a socket (ENXIO) before fstat can name it: say what the path is when it is no file.
		if info, serr := os.Stat(path); serr == nil && !info.Mode().IsRegular() {
			return nil, Check(path, info, limit)
		}
		return nil, err
	}
	defer f.Close()
	return readChecked(f, path, limit)
}

// Open opens the regular file at path for streaming reads, with Read's checks (opened without blocking, then
// fstat: a FIFO, device or directory is refused, not waited on; a file over limit bytes is refused, limit <= 0:
// no limit) and O_NONBLOCK cleared. The caller closes it and bounds its own reading.
func Open(path string, limit int64) (*os.File, error) {
	f, err := openNonBlocking(path, Options{})
	if err != nil {
		if info, serr := os.Stat(path); serr == nil && !info.Mode().IsRegular() {
			return nil, Check(path, info, limit)
		}
		return nil, err
	}
	info, err := f.Stat()
	if err == nil {
		err = Check(path, info, limit)
	}
	if err == nil {
		if cerr := clearNonBlock(f); cerr != nil {
			err = &fs.PathError{Op: "open", Path: path, Err: cerr}
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ReadIn is Read for a name inside root (os.Root keeps the read inside it, links included).
func ReadIn(root *os.Root, name string, limit int64) ([]byte, error) {
	f, err := root.OpenFile(name, openFlags(Options{}), 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readChecked(f, name, limit)
}

// OpenIn opens name inside root without blocking and returns it only when it is a regular file of at most limit
// bytes (limit <= 0: no limit), with O_NONBLOCK cleared; for fs.FS implementations whose callers read themselves.
func OpenIn(root *os.Root, name string, limit int64) (*os.File, error) {
	f, err := root.OpenFile(name, openFlags(Options{}), 0)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err == nil {
		err = Check(name, info, limit)
	}
	if err == nil {
		err = clearNonBlock(f)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// readChecked fstats f, refuses what is not a regular file within limit, clears O_NONBLOCK and reads.
func readChecked(f *os.File, path string, limit int64) ([]byte, error) {
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := Check(path, info, limit); err != nil {
		return nil, err
	}
	if err := clearNonBlock(f); err != nil {
		return nil, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	r := io.Reader(f)
	if limit > 0 {
		// The file may grow between fstat and read: read at most one byte past the limit to notice.
		r = io.LimitReader(f, limit+1)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if limit > 0 && int64(len(b)) > limit {
		return nil, tooLarge(path, int64(len(b)), limit, true)
	}
	return b, nil
}

// Check refuses info when it is not a regular file of at most limit bytes (limit <= 0: no limit); for callers
// that open files themselves.
func Check(path string, info fs.FileInfo, limit int64) error {
	if !info.Mode().IsRegular() {
		return &Error{Path: path, Reason: "is " + Describe(info.Mode()) + ", not a regular file", Err: ErrNotRegular}
	}
	if limit > 0 && info.Size() > limit {
		return tooLarge(path, info.Size(), limit, false)
	}
	return nil
}

func tooLarge(path string, size, limit int64, grew bool) error {
	what := fmt.Sprintf("is %d bytes, over the limit of %s", size, formatSize(limit))
	if grew {
		what = fmt.Sprintf("grew past the limit of %s while it was read", formatSize(limit))
	}
	return &Error{Path: path, Reason: what, Err: ErrTooLarge}
}

// Describe names a file type for a message: "a named pipe (FIFO)", "a directory", ...
func Describe(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeIrregular != 0:
		return "an irregular file"
	}
	return "not a file"
}

func formatSize(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
