// Package sockrelay is a unix socket relay a test puts between kewplan and the Docker engine (DOCKER_HOST points
// at it) to close the engine's socket on purpose: Cut closes every live connection and refuses new ones, Restore
// listens again. The machine's own engine is never disturbed.
package sockrelay

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Relay proxies each connection made to its socket to the engine's socket, byte for byte.
type Relay struct {
	path   string
	target string

	mu    sync.Mutex
	ln    *net.UnixListener
	conns map[net.Conn]bool
	cut   bool
	wg    sync.WaitGroup
	// match and cutDone are CutOnAnswer's trigger, while armed.
	match   func(chunk []byte) bool
	cutDone chan struct{}
}

// EngineSocket is the machine's engine socket: the path of a unix:// DOCKER_HOST, else /var/run/docker.sock.
func EngineSocket() string {
	if h, ok := strings.CutPrefix(os.Getenv("DOCKER_HOST"), "unix://"); ok && h != "" {
		return h
	}
	return "/var/run/docker.sock"
}

// Start listens on a new socket in a directory of its own (short enough for a socket path) that relays to target,
// and closes it when the test ends.
func Start(t testing.TB, target string) *Relay {
	t.Helper()
	dir, err := os.MkdirTemp("", "kewplan-relay-")
	if err != nil {
		t.Fatal(err)
	}
	r := &Relay{path: filepath.Join(dir, "engine.sock"), target: target, conns: map[net.Conn]bool{}}
	if err := r.listen(); err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.Close()
		os.RemoveAll(dir)
	})
	return r
}

// Host is the DOCKER_HOST value that reaches the engine through the relay.
func (r *Relay) Host() string { return "unix://" + r.path }

// Path is the relay's socket.
func (r *Relay) Path() string { return r.path }

func (r *Relay) listen() error {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: r.path, Net: "unix"})
	if err != nil {
		return fmt.Errorf("relay: listen on %s: %w", r.path, err)
	}
	ln.SetUnlinkOnClose(true) // a cut engine's socket is gone: a client's connect fails at once
	r.mu.Lock()
	r.ln, r.cut = ln, false
	r.mu.Unlock()
	r.wg.Add(1)
	go r.accept(ln)
	return nil
}

func (r *Relay) accept(ln *net.UnixListener) {
	defer r.wg.Done()
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			return
		}
		up, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: r.target, Net: "unix"})
		if err != nil {
			c.Close()
			continue
		}
		r.mu.Lock()
		if r.cut {
			r.mu.Unlock()
			c.Close()
			up.Close()
			continue
		}
		r.conns[c], r.conns[up] = true, true
		r.mu.Unlock()
		r.wg.Add(1)
		go r.pipe(c, up)
	}
}

// pipe copies both ways, passing on each half-close (an attach stream ends its writing side first), and forgets
// both ends once both directions are done. A connection on which CutOnAnswer's request went out cuts the relay
// when the engine's answer begins.
func (r *Relay) pipe(c, up *net.UnixConn) {
	defer r.wg.Done()
	var tripped atomic.Bool
	var both sync.WaitGroup
	both.Add(2)
	go func() { // client -> engine
		defer both.Done()
		r.copy(up, c, func(chunk []byte) bool {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.match != nil && r.match(chunk) {
				r.match = nil
				tripped.Store(true)
			}
			return true
		})
	}()
	go func() { // engine -> client
		defer both.Done()
		r.copy(c, up, func([]byte) bool {
			if !tripped.Load() {
				return true
			}
			r.mu.Lock()
			done := r.cutDone
			r.cutDone = nil
			r.mu.Unlock()
			r.Cut()
			if done != nil {
				close(done)
			}
			return false
		})
	}()
	both.Wait()
	c.Close()
	up.Close()
	r.mu.Lock()
	delete(r.conns, c)
	delete(r.conns, up)
	r.mu.Unlock()
}

// copy passes src's bytes to dst, each chunk only when pass says so (false ends the copy), then half-closes dst.
func (r *Relay) copy(dst, src *net.UnixConn, pass func(chunk []byte) bool) {
	defer dst.CloseWrite()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !pass(buf[:n]) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// CutOnAnswer arms the relay: the first chunk a client writes for which match returns true (match sees every chunk
// clients write, one call at a time) is passed on to the engine, and when the engine begins to answer on that
// connection the relay cuts (as Cut) instead of passing the answer on: the request took effect, its answer is lost.
// The channel is closed once the relay cut. A request line arrives in one chunk (Go's HTTP client writes it whole).
func (r *Relay) CutOnAnswer(match func(chunk []byte) bool) <-chan struct{} {
	done := make(chan struct{})
	r.mu.Lock()
	r.match, r.cutDone = match, done
	r.mu.Unlock()
	return done
}

// Cut closes the relay's socket and every live connection through it: requests in flight fail, streams (logs,
// attach, waits) end, and new connections are refused until Restore.
func (r *Relay) Cut() {
	r.mu.Lock()
	r.cut = true
	ln := r.ln
	r.ln = nil
	conns := make([]net.Conn, 0, len(r.conns))
	for c := range r.conns {
		conns = append(conns, c)
	}
	r.mu.Unlock()
	if ln != nil {
		_ = ln.Close()
	}
	for _, c := range conns {
		_ = c.Close()
	}
}

// Restore listens on the socket again; connections made from now on reach the engine.
func (r *Relay) Restore() error {
	r.mu.Lock()
	open := r.ln != nil
	r.mu.Unlock()
	if open {
		return errors.New("relay: Restore without a Cut")
	}
	return r.listen()
}

// Close cuts the relay for good and waits for its goroutines.
func (r *Relay) Close() {
	r.Cut()
	r.wg.Wait()
}
