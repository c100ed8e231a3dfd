//go:build unix

package safefile

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readWithBackstop runs read in a goroutine so that a regression (a blocking open) fails the test instead of
// hanging the test binary. The timeout is a backstop, not a measurement: a correct read returns at once.
func readWithBackstop(t *testing.T, read func() ([]byte, error)) ([]byte, error) {
	t.Helper()
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := read()
		done <- result{b, err}
	}()
	select {
	case r := <-done:
		return r.b, r.err
	case <-time.After(30 * time.Second):
		t.Fatal("the read blocked: a FIFO or device was opened without O_NONBLOCK")
		return nil, nil
	}
}

func TestRead(t *testing.T) {
	dir := t.TempDir()
	regular := filepath.Join(dir, "main.hcl")
	if err := os.WriteFile(regular, []byte("node {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "pipe.hcl")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.hcl")
	if err := os.WriteFile(big, make([]byte, 2048), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.hcl")
	if err := os.Symlink("main.hcl", link); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "s.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	for _, tc := range []struct {
		name, path string
		opts       Options
		want       string // content, or "" when an error is expected
		errIs      error
		errHas     string
	}{
		{name: "regular", path: regular, want: "node {}\n"},
		{name: "link followed", path: link, want: "node {}\n"},
		{name: "link refused", path: link, opts: Options{NoFollow: true}, errIs: ErrNotRegular, errHas: "symbolic link"},
		{name: "fifo", path: fifo, errIs: ErrNotRegular, errHas: "pipe.hcl is a named pipe (FIFO), not a regular file"},
		{name: "directory", path: dir, errIs: ErrNotRegular, errHas: "is a directory"},
		{name: "char device", path: "/dev/zero", errIs: ErrNotRegular, errHas: "/dev/zero is a character device"},
		{name: "socket", path: sock, errIs: ErrNotRegular, errHas: "s.sock is a socket"},
		{name: "too large", path: big, errIs: ErrTooLarge, errHas: "is 2048 bytes, over the limit of 1 KiB"},
		{name: "missing", path: filepath.Join(dir, "nope"), errIs: os.ErrNotExist},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := readWithBackstop(t, func() ([]byte, error) { return ReadWith(tc.path, 1024, tc.opts) })
			if tc.want != "" {
				if err != nil || string(b) != tc.want {
					t.Fatalf("ReadWith(%s) = %q, %v; want %q", tc.path, b, err, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("ReadWith(%s) succeeded, want an error", tc.path)
			}
			if tc.errIs != nil && !errors.Is(err, tc.errIs) {
				t.Errorf("error %q is not %v", err, tc.errIs)
			}
			if !strings.Contains(err.Error(), tc.errHas) {
				t.Errorf("error %q does not contain %q", err, tc.errHas)
			}
		})
	}
}

func TestReadInRefusesFIFO(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe.md"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ok.md"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	_, err = readWithBackstop(t, func() ([]byte, error) { return ReadIn(root, "pipe.md", 0) })
	if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "pipe.md is a named pipe (FIFO)") {
		t.Fatalf("ReadIn(pipe.md) error = %v, want a refused FIFO", err)
	}
	if b, err := ReadIn(root, "ok.md", 0); err != nil || string(b) != "hi" {
		t.Fatalf("ReadIn(ok.md) = %q, %v", b, err)
	}
}

func TestOpenInRefusesFIFO(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe.md"), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	_, err = readWithBackstop(t, func() ([]byte, error) {
		f, err := OpenIn(root, "pipe.md", 0)
		if f != nil {
			f.Close()
		}
		return nil, err
	})
	if !errors.Is(err, ErrNotRegular) {
		t.Fatalf("OpenIn(pipe.md) error = %v, want a refused FIFO", err)
	}
}

func TestOpenRefusesFIFOAndReadsFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "run.ndjson")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := readWithBackstop(t, func() ([]byte, error) {
		f, err := Open(fifo, 0)
		if f != nil {
			f.Close()
		}
		return nil, err
	})
	if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "named pipe") {
		t.Fatalf("Open(FIFO) error = %v, want a refused named pipe", err)
	}
	if _, err := Open(dir, 0); !errors.Is(err, ErrNotRegular) {
		t.Errorf("Open(directory) error = %v, want ErrNotRegular", err)
	}
	name := filepath.Join(dir, "ok.ndjson")
	if err := os.WriteFile(name, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(name, 2); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Open(3 bytes, limit 2) error = %v, want ErrTooLarge", err)
	}
	f, err := Open(name, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 8)
	if n, err := f.Read(buf); err != nil || string(buf[:n]) != "{}\n" {
		t.Errorf("Read = %q, %v", buf[:n], err)
	}
}
