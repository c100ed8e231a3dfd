package engine

import (
	"bytes"
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

func TestReconnectWithin(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  time.Duration
		err   bool
	}{
		{"", DefaultReconnectWithin, false},
		{"5s", 5 * time.Second, false},
		{"2m", 2 * time.Minute, false},
		{"soon", 0, true},
		{"0s", 0, true},
		{"-1s", 0, true},
	} {
		got, err := reconnectWithin(map[string]string{ReconnectWithinEnv: tc.value})
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("reconnectWithin(%q) = %v, %v; want %v (error %v)", tc.value, got, err, tc.want, tc.err)
		}
		if err != nil && !strings.Contains(err.Error(), ReconnectWithinEnv+"=30s") {
			t.Errorf("reconnectWithin(%q) does not say how to fix it: %v", tc.value, err)
		}
	}
}

// TestOutputResumesWhereItEnded: a second follower of the same output (the engine's log after a reconnect, which
// starts from the container's first byte) delivers only what the first one had not.
func TestOutputResumesWhereItEnded(t *testing.T) {
	var stdout, stderr bytes.Buffer
	out := &runOutput{stdout: &countingWriter{w: &stdout}, stderr: &countingWriter{w: &stderr}}
	first := []byte("line 1\nline 2\npart")
	if _, err := (&skipWriter{w: out.stdout, skip: out.stdout.n}).Write(first); err != nil {
		t.Fatal(err)
	}
	if _, err := (&skipWriter{w: out.stderr, skip: out.stderr.n}).Write([]byte("err 1\n")); err != nil {
		t.Fatal(err)
	}
	// The log replays everything, in pieces that do not line up with what was delivered.
	again := &skipWriter{w: out.stdout, skip: out.stdout.n}
	for _, piece := range []string{"line 1\nli", "ne 2\npartial line 3\n", "line 4\n"} {
		if n, err := again.Write([]byte(piece)); err != nil || n != len(piece) {
			t.Fatalf("Write(%q) = %d, %v", piece, n, err)
		}
	}
	errAgain := &skipWriter{w: out.stderr, skip: out.stderr.n}
	_, _ = errAgain.Write([]byte("err 1\nerr 2\n"))
	if got, want := stdout.String(), "line 1\nline 2\npartial line 3\nline 4\n"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
	if got, want := stderr.String(), "err 1\nerr 2\n"; got != want {
		t.Errorf("stderr = %q, want %q", got, want)
	}
}

// TestEngineLostSharedAndBounded: callers waiting for an engine whose socket is gone share one probe, get an
// *EngineLostError naming DOCKER_HOST once the bound has passed, and every later caller gets it at once.
func TestEngineLostSharedAndBounded(t *testing.T) {
	host := "unix://" + filepath.Join(t.TempDir(), "gone.sock")
	cli, err := client.New(client.WithHost(host))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	e := &Engine{cli: cli, host: host, health: &health{bound: 300 * time.Millisecond}}
	if e.Lost() != nil {
		t.Fatal("a fresh engine reads lost")
	}
	cause := errors.New("the wait's connection broke")
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = e.awaitEngine(context.Background(), cause)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		var lost *EngineLostError
		if !errors.As(err, &lost) || !errors.Is(err, ErrEngineLost) {
			t.Fatalf("caller %d: %v, want an *EngineLostError", i, err)
		}
		if !strings.Contains(err.Error(), "DOCKER_HOST="+host) || lost.Bound != 300*time.Millisecond {
			t.Errorf("caller %d: %v", i, err)
		}
	}
	if e.health.probes != 1 {
		t.Errorf("%d probes ran for 4 callers, want 1", e.health.probes)
	}
	if err := e.awaitEngine(context.Background(), cause); !errors.Is(err, ErrEngineLost) || e.health.probes != 1 {
		t.Errorf("a later caller: %v after %d probes; want the loss at once, without a probe", err, e.health.probes)
	}
	if !errors.Is(e.Lost(), ErrEngineLost) {
		t.Errorf("Lost() = %v", e.Lost())
	}
	// A failed request is reported as the loss; an answer of the engine is left as it is.
	if err := e.lostOr(context.Background(), &net.OpError{Op: "dial", Net: "unix", Err: syscall.ENOENT}); !errors.Is(err, ErrEngineLost) {
		t.Errorf("lostOr(connection failed) = %v", err)
	}
	if err := e.lostOr(context.Background(), errors.New("No such image")); errors.Is(err, ErrEngineLost) {
		t.Errorf("lostOr(an answer) = %v", err)
	}
}
