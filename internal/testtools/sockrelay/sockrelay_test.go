package sockrelay

import (
	"bufio"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// echoServer is a unix socket that echoes every line back.
func echoServer(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "kewplan-echo-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "echo.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					if _, err := c.Write(append(sc.Bytes(), '\n')); err != nil {
						return
					}
				}
			}()
		}
	}()
	return path
}

func roundTrip(t *testing.T, c net.Conn, line string) (string, error) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second)) // backstop only
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

// TestRelayCutRestore: a live connection works through the relay, ends at Cut, new ones are refused until
// Restore, and work again after it.
func TestRelayCutRestore(t *testing.T) {
	r := Start(t, echoServer(t))
	c, err := net.Dial("unix", r.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, err := roundTrip(t, c, "hello"); err != nil || got != "hello\n" {
		t.Fatalf("through the relay: %q, %v", got, err)
	}
	r.Cut()
	if got, err := roundTrip(t, c, "after"); err == nil {
		t.Fatalf("a live connection still answers after Cut: %q", got)
	}
	if c2, err := net.Dial("unix", r.Path()); err == nil {
		c2.Close()
		t.Fatal("a new connection was accepted after Cut")
	}
	if err := r.Restore(); err != nil {
		t.Fatal(err)
	}
	c3, err := net.Dial("unix", r.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if got, err := roundTrip(t, c3, "again"); err != nil || got != "again\n" {
		t.Fatalf("after Restore: %q, %v", got, err)
	}
	if err := r.Restore(); err == nil {
		t.Fatal("Restore without a Cut succeeded")
	}
}

// TestRelayCutOnAnswer: the armed request reaches the server, its answer does not, and the relay is cut.
func TestRelayCutOnAnswer(t *testing.T) {
	r := Start(t, echoServer(t))
	c, err := net.Dial("unix", r.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cut := r.CutOnAnswer(func(chunk []byte) bool { return strings.Contains(string(chunk), "trip") })
	if got, err := roundTrip(t, c, "hello"); err != nil || got != "hello\n" {
		t.Fatalf("before the trigger: %q, %v", got, err)
	}
	if got, err := roundTrip(t, c, "trip"); err == nil {
		t.Fatalf("the armed request's answer came through: %q", got)
	}
	select {
	case <-cut:
	case <-time.After(10 * time.Second): // backstop only
		t.Fatal("the relay did not report its cut")
	}
	if c2, err := net.Dial("unix", r.Path()); err == nil {
		c2.Close()
		t.Fatal("a new connection was accepted after the cut")
	}
}
