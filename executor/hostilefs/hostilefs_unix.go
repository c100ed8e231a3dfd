//go:build unix

package hostilefs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Reading a checkout the agent controlled: every byte, name, file type and link under it is hostile. The host
// walks it one component at a time from a directory descriptor, opening each component with O_NOFOLLOW, so a
// planted symbolic link is never followed, not even one that stays inside the checkout. Role files are opened only
// after fstatat says they are regular, with O_NONBLOCK (a FIFO swapped in cannot block) and O_NOCTTY, and the
// opened descriptor must be the very inode that was inspected. Directories on another device are refused, which
// stands in for openat2's RESOLVE_NO_XDEV without needing Linux 5.6.

// Dir is an open directory inside a checkout the agent controlled.
type Dir struct {
	f   *os.File
	dev uint64
	rel string // slash-separated path relative to the checkout root; "." for the root
}

// Stat is what fstatat/fstat said about one directory entry, without following links.
type Stat struct {
	Mode  uint32
	Dev   uint64
	Ino   uint64
	Nlink uint64
	Size  int64
}

func (s Stat) IsRegular() bool { return s.Mode&unix.S_IFMT == unix.S_IFREG }
func (s Stat) IsDir() bool     { return s.Mode&unix.S_IFMT == unix.S_IFDIR }

// Kind names a file type for a diagnostic ("is a symbolic link").
func (s Stat) Kind() string {
	switch s.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "a regular file"
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFLNK:
		return "a symbolic link"
	case unix.S_IFIFO:
		return "a named pipe (FIFO)"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFCHR:
		return "a character device"
	case unix.S_IFBLK:
		return "a block device"
	}
	return fmt.Sprintf("a file of unknown type %#o", s.Mode&unix.S_IFMT)
}

func statFromUnix(st *unix.Stat_t) Stat {
	return Stat{
		Mode:  uint32(st.Mode),
		Dev:   uint64(st.Dev),
		Ino:   uint64(st.Ino),
		Nlink: uint64(st.Nlink),
		Size:  int64(st.Size),
	}
}

// errHostileNotExist wraps fs.ErrNotExist so callers can tell "absent" from "refused".
var errHostileNotExist = os.ErrNotExist

// FileError is a refusal to use an entry of the checkout: wrong type, a link, too large, on another device.
type FileError struct {
	Rel    string // slash-separated path relative to the checkout root
	Reason string // "is a symbolic link"
}

func (e *FileError) Error() string { return e.Rel + " " + e.Reason }

// OpenRoot opens the checkout directory itself. Its path was chosen by the host, so resolving it follows
// the host's own links; everything beneath it is resolved by Dir.
func OpenRoot(dir string) (*Dir, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "fstat", Path: dir, Err: err}
	}
	return &Dir{f: os.NewFile(uintptr(fd), dir), dev: uint64(st.Dev), rel: "."}, nil
}

func (d *Dir) Close() error { return d.f.Close() }

// Dev is the device the directory is on: a child on another device is a mount point.
func (d *Dir) Dev() uint64 { return d.dev }

func (d *Dir) fd() int { return int(d.f.Fd()) }

// Join gives the checkout-relative path of a child, for diagnostics.
func (d *Dir) Join(name string) string {
	if d.rel == "." {
		return name
	}
	return d.rel + "/" + name
}

// hostileName refuses anything but a single plain path component.
func hostileName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') || strings.ContainsRune(name, 0) {
		return fmt.Errorf("internal error: %q is not a single path component", name)
	}
	return nil
}

// Lstat inspects a child without following it. A missing child gives an error wrapping os.ErrNotExist.
func (d *Dir) Lstat(name string) (Stat, error) {
	if err := hostileName(name); err != nil {
		return Stat{}, err
	}
	var st unix.Stat_t
	if err := unix.Fstatat(d.fd(), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return Stat{}, &os.PathError{Op: "lstat", Path: d.Join(name), Err: err}
	}
	return statFromUnix(&st), nil
}

// OpenDir opens a child directory. A link, a file or a directory on another device is refused.
func (d *Dir) OpenDir(name string) (*Dir, error) {
	st, err := d.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, &FileError{Rel: d.Join(name), Reason: "is " + st.Kind() + ", not a directory"}
	}
	fd, err := unix.Openat(d.fd(), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: d.Join(name), Err: err}
	}
	sub := &Dir{f: os.NewFile(uintptr(fd), d.Join(name)), rel: d.Join(name)}
	got, err := sub.fstat()
	if err != nil {
		sub.Close()
		return nil, err
	}
	if got.Dev != st.Dev || got.Ino != st.Ino || !got.IsDir() {
		sub.Close()
		return nil, &FileError{Rel: sub.rel, Reason: "changed while it was being opened"}
	}
	if got.Dev != d.dev {
		sub.Close()
		return nil, &FileError{Rel: sub.rel, Reason: "is on another filesystem (a mount point)"}
	}
	sub.dev = got.Dev
	return sub, nil
}

// OpenPath opens a slash-separated directory path beneath d, one component at a time.
func (d *Dir) OpenPath(rel string) (*Dir, error) {
	cur := d
	for _, name := range strings.Split(rel, "/") {
		next, err := cur.OpenDir(name)
		if cur != d {
			cur.Close()
		}
		if err != nil {
			return nil, err
		}
		cur = next
	}
	return cur, nil
}

func (d *Dir) fstat() (Stat, error) {
	var st unix.Stat_t
	if err := unix.Fstat(d.fd(), &st); err != nil {
		return Stat{}, &os.PathError{Op: "fstat", Path: d.rel, Err: err}
	}
	return statFromUnix(&st), nil
}

// OpenRegular opens a child that must be a regular file, without following a link and without blocking. The
// returned stat is the opened descriptor's own.
func (d *Dir) OpenRegular(name string) (*os.File, Stat, error) {
	st, err := d.Lstat(name)
	if err != nil {
		return nil, Stat{}, err
	}
	if !st.IsRegular() {
		return nil, st, &FileError{Rel: d.Join(name), Reason: "is " + st.Kind() + ", not a regular file"}
	}
	fd, err := unix.Openat(d.fd(), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, st, &os.PathError{Op: "open", Path: d.Join(name), Err: err}
	}
	f := os.NewFile(uintptr(fd), d.Join(name))
	var ust unix.Stat_t
	if err := unix.Fstat(fd, &ust); err != nil {
		f.Close()
		return nil, st, &os.PathError{Op: "fstat", Path: d.Join(name), Err: err}
	}
	got := statFromUnix(&ust)
	if got.Dev != st.Dev || got.Ino != st.Ino || !got.IsRegular() {
		f.Close()
		return nil, got, &FileError{Rel: d.Join(name), Reason: "changed while it was being opened"}
	}
	if got.Dev != d.dev {
		f.Close()
		return nil, got, &FileError{Rel: d.Join(name), Reason: "is on another filesystem (a mount point)"}
	}
	return f, got, nil
}

// Unlink removes a child that is not a directory (a link is removed itself, never its target).
func (d *Dir) Unlink(name string) error {
	if err := hostileName(name); err != nil {
		return err
	}
	if err := unix.Unlinkat(d.fd(), name, 0); err != nil {
		return &os.PathError{Op: "unlink", Path: d.Join(name), Err: err}
	}
	return nil
}

// ReadRegular reads a child regular file of at most limit bytes. The size is checked before reading (a sparse
// 1 TiB file costs nothing) and the read itself stops at limit+1 bytes, so a file that grows is still refused.
func (d *Dir) ReadRegular(name string, limit int64) ([]byte, Stat, error) {
	f, st, err := d.OpenRegular(name)
	if err != nil {
		return nil, st, err
	}
	defer f.Close()
	data, err := ReadAtMost(f, st, limit, d.Join(name))
	return data, st, err
}

// ReadAtMost reads an opened role file of at most limit bytes; rel names it in errors.
func ReadAtMost(f *os.File, st Stat, limit int64, rel string) ([]byte, error) {
	if st.Size > limit {
		return nil, &FileError{Rel: rel, Reason: fmt.Sprintf("is %d bytes, over the %d-byte limit", st.Size, limit)}
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", rel, err)
	}
	if int64(len(data)) > limit {
		return nil, &FileError{Rel: rel, Reason: fmt.Sprintf("is over the %d-byte limit", limit)}
	}
	return data, nil
}

// ReadNames lists up to max entry names of d (in the filesystem's order). It reports whether more entries
// were left unread. "." and ".." are never returned.
func (d *Dir) ReadNames(max int) ([]string, bool, error) {
	if _, err := unix.Seek(d.fd(), 0, io.SeekStart); err != nil {
		return nil, false, &os.PathError{Op: "seek", Path: d.rel, Err: err}
	}
	var names []string
	buf := make([]byte, 32*1024)
	for {
		n, err := unix.ReadDirent(d.fd(), buf)
		if err != nil {
			return nil, false, &os.PathError{Op: "readdirent", Path: d.rel, Err: err}
		}
		if n <= 0 {
			return names, false, nil
		}
		var batch []string
		_, _, batch = unix.ParseDirent(buf[:n], -1, batch)
		for _, name := range batch {
			if len(names) == max {
				return names, true, nil
			}
			names = append(names, name)
		}
	}
}

// IsNotExist reports whether err says an entry was absent.
func IsNotExist(err error) bool { return errors.Is(err, errHostileNotExist) }
