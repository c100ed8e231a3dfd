package egress

import (
	"bytes"
	"container/list"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dustin/go-humanize"
)

// Limits bound what the proxy holds for its clients, so that one node (or anything that can reach the proxy's
// port) cannot take egress away from the others. Zero fields take the defaults below.
type Limits struct {
	// MaxConns bounds every client connection at once. When it is reached a new connection evicts the oldest one
	// that has no request in progress (an idle keep-alive, or one still sending its headers); only when every
	// connection is busy is the newcomer refused, for load.
	MaxConns int
	// MaxPerNode bounds one node's requests in progress and open tunnels: a node at its bound is refused for load,
	// and the others keep their share of MaxConns.
	MaxPerNode int
	// HeaderTimeout bounds reading a request's line and headers.
	HeaderTimeout time.Duration
	// IdleTimeout closes a client connection, a tunnel or an upstream connection that carried no byte either way
	// for that long.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's line and headers: past it the request is refused unread (431).
	MaxHeaderBytes int
	// TunnelSlots bounds how many of one node's tunnel writes are in progress at once, so that the proxy's
	// copying is shared by nodes, not by connections (fair.go).
	TunnelSlots int
}

// Default limits: generous for agents (a model's stream may pause for minutes), small enough that a flood of
// parked connections costs the proxy a few tens of MiB at most.
const (
	DefaultMaxConns       = 1024
	DefaultMaxPerNode     = 128
	DefaultHeaderTimeout  = 10 * time.Second
	DefaultIdleTimeout    = 5 * time.Minute
	DefaultMaxHeaderBytes = 64 << 10
)

func (l Limits) withDefaults() Limits {
	if l.MaxConns <= 0 {
		l.MaxConns = DefaultMaxConns
	}
	if l.MaxPerNode <= 0 {
		l.MaxPerNode = DefaultMaxPerNode
	}
	if l.HeaderTimeout <= 0 {
		l.HeaderTimeout = DefaultHeaderTimeout
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if l.TunnelSlots <= 0 {
		l.TunnelSlots = DefaultTunnelSlots
	}
	return l
}

// connTracker is the proxy's account of its client connections: which are open, which may be evicted (no request
// in a handler), and how many each node holds.
type connTracker struct {
	limits Limits
	shares map[string]*tunnelShare // each node's tunnel slots, read only
	onLoad func(sentence string)   // records a refusal for load that names no node
	// onUnread records a request Go's server refused before any handler read it (headers over MaxHeaderBytes, a
	// malformed request), with the sentence the client was answered with instead of Go's bare status text.
	onUnread func(status int, reason, sentence string)
	// brokerAPI is the API of the brokered node a request's first bytes address ("" for none): its unread
	// refusal is then in that API's JSON error shape (unread.go).
	brokerAPI func(head []byte) string
	mu        sync.Mutex
	open      int
	evict     *list.List // of *trackedConn, oldest first: open connections with no request in a handler
	perNode   map[string]int
}

func newConnTracker(l Limits, shares map[string]*tunnelShare, onLoad func(string), onUnread func(int, string, string)) *connTracker {
	return &connTracker{limits: l, shares: shares, onLoad: onLoad, onUnread: onUnread, evict: list.New(), perNode: map[string]int{}}
}

// trackedConn is a client connection: closed after IdleTimeout without traffic, and counted until closed.
type trackedConn struct {
	idleConn
	t        *connTracker
	elem     *list.Element // in t.evict while evictable
	node     string        // the node whose slot the connection holds, "" for none
	busy     bool          // a request is in a handler
	hijacked bool          // a tunnel owns the connection
	// share is the tunnel's node's slots once a tunnel owns the connection: its writes take them (fair.go).
	share atomic.Pointer[tunnelShare]
	// phase is where the connection's current request is (phaseIdle, phaseHeaders, phaseHandler), and readTimedOut
	// says the last read ended at a deadline: both say when Go's server gives up on a request whose headers are
	// still arriving (Close).
	phase        atomic.Int32
	readTimedOut atomic.Bool
	admitted     bool // counted in t.open
	closed       bool
	// head is the first bytes of the current request (its request line, for the shape of an unread refusal).
	head  [256]byte
	headN int
}

// admit counts a new connection, evicting the oldest evictable one when the proxy is full; false when every
// connection is busy.
func (t *connTracker) admit(c *trackedConn) bool {
	t.mu.Lock()
	var victim *trackedConn
	if t.open >= t.limits.MaxConns {
		front := t.evict.Front()
		if front == nil {
			t.mu.Unlock()
			return false
		}
		victim = front.Value.(*trackedConn)
		t.dropLocked(victim)
	}
	t.open++
	c.admitted = true
	c.elem = t.evict.PushBack(c)
	t.mu.Unlock()
	if victim != nil {
		victim.stop()
		_ = victim.idleConn.Conn.Close()
	}
	return true
}

// dropLocked forgets a connection (closed or evicted) and frees what it held.
func (t *connTracker) dropLocked(c *trackedConn) {
	if c.closed || !c.admitted {
		return
	}
	c.closed = true
	t.open--
	if c.elem != nil {
		t.evict.Remove(c.elem)
		c.elem = nil
	}
	if c.node != "" {
		t.perNode[c.node]--
		c.node = ""
	}
}

// begin marks a connection busy for a request in a handler: it is no longer evictable.
func (t *connTracker) begin(c *trackedConn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c.busy = true
	c.phase.Store(phaseHandler)
	if c.elem != nil {
		t.evict.Remove(c.elem)
		c.elem = nil
	}
}

// claim takes one of node's slots for the connection's request (and its tunnel); false at MaxPerNode.
func (t *connTracker) claim(c *trackedConn, node string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c.closed || c.node == node {
		return true
	}
	if t.perNode[node] >= t.limits.MaxPerNode {
		return false
	}
	t.perNode[node]++
	c.node = node
	return true
}

// end is the end of a request's handler: a connection that became a tunnel keeps its slot until it closes; any
// other frees its node's slot and is evictable again.
func (t *connTracker) end(c *trackedConn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c.busy = false
	c.phase.Store(phaseIdle)
	if c.closed || c.hijacked {
		return
	}
	if c.node != "" {
		t.perNode[c.node]--
		c.node = ""
	}
	if c.elem == nil {
		c.elem = t.evict.PushBack(c)
	}
}

func (t *connTracker) hijacked(c *trackedConn) {
	t.mu.Lock()
	c.hijacked = true
	if c.node != "" {
		c.share.Store(t.shares[c.node])
	}
	t.mu.Unlock()
}

// Write passes the server's writes on, but for the answer Go's server writes itself, before any handler, to a
// request it cannot read (headers over MaxHeaderBytes, a malformed request line or header): that one becomes a
// refusal with its sentence, so the agent reads why, as for every other refusal. Go's answer is recognised by its
// fixed form, a status line followed directly by Go's two error headers, which no handler's answer has (a handler's
// headers are written sorted, Connection first, with Date and a length); a tunnel's bytes are never looked at.
func (c *trackedConn) Write(p []byte) (int, error) {
	if status, text, ok := serverErrorAnswer(p); ok && !c.isHijacked() {
		reason, sentence := unreadSentence(status, text, c.t.limits.MaxHeaderBytes)
		c.t.onUnread(status, reason, sentence)
		c.phase.Store(phaseIdle) // answered
		var b bytes.Buffer
		if api := c.brokerAPI(); api != "" {
			writeRawAPIError(&b, api, status, sentence)
		} else {
			writeRefusal(&b, status, sentence)
		}
		if _, err := c.idleConn.Write(b.Bytes()); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	if s := c.share.Load(); s != nil {
		return s.write(c.idleConn.Write, p)
	}
	return c.idleConn.Write(p)
}

// Phases of a connection's current request.
const (
	phaseIdle    = iota // no request yet, or the last one answered
	phaseHeaders        // a request's first bytes arrived; its handler has not started
	phaseHandler        // a handler has the request
)

// Read notes what Close needs to tell a request whose headers were too slow from a quiet keep-alive.
func (c *trackedConn) Read(p []byte) (int, error) {
	n, err := c.idleConn.Read(p)
	if n > 0 {
		if c.phase.CompareAndSwap(phaseIdle, phaseHeaders) {
			c.headN = 0
		}
		if c.phase.Load() == phaseHeaders && c.headN < len(c.head) {
			c.headN += copy(c.head[c.headN:], p[:n])
		}
	}
	var ne net.Error
	c.readTimedOut.Store(err != nil && errors.As(err, &ne) && ne.Timeout())
	return n, err
}

func (c *trackedConn) isHijacked() bool {
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	return c.hijacked
}

// goErrorHeaders follow the status line of the answers net/http's server writes itself to a request it could not
// read (conn.serve).
const goErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// serverErrorAnswer recognises such an answer: its status and the text after the status code ("Request Header
// Fields Too Large", "Bad Request: missing required Host header").
func serverErrorAnswer(p []byte) (int, string, bool) {
	rest, ok := bytes.CutPrefix(p, []byte("HTTP/1.1 "))
	if !ok || len(rest) < 4 || rest[3] != ' ' {
		return 0, "", false
	}
	line, _, ok := bytes.Cut(rest, []byte(goErrorHeaders))
	if !ok || bytes.ContainsAny(line, "\r\n") {
		return 0, "", false
	}
	status, err := strconv.Atoi(string(line[:3]))
	if err != nil || status < 400 || status > 599 {
		return 0, "", false
	}
	return status, string(line[4:]), true
}

// unreadSentence is the decision reason of a request Go's server could not read, and its refusal.
func unreadSentence(status int, text string, maxHeader int) (string, string) {
	if status == http.StatusRequestHeaderFieldsTooLarge {
		return ReasonHeadersTooLarge, fmt.Sprintf("the request was refused unread because its line and headers are larger than the proxy's bound of %s; send smaller headers",
			humanize.IBytes(uint64(maxHeader)))
	}
	return ReasonMalformedRequest, fmt.Sprintf("the request was refused because it is not well-formed HTTP/1.1 (%s); send a request line, a Host header and headers as HTTP/1.1 defines them",
		headerSafe(clip(text)))
}

// Close closes the connection and frees what it held. Go's server closes a connection whose request line and
// headers did not arrive within the header timeout without a word; when part of a request had arrived, the client
// is answered 408 with its refusal sentence first (a keep-alive that merely stayed quiet is closed as it is).
func (c *trackedConn) Close() error {
	if c.readTimedOut.Load() && c.phase.Load() == phaseHeaders && !c.isHijacked() {
		sentence := fmt.Sprintf("the request was refused because its line and headers did not arrive within %s; send the whole request at once",
			c.t.limits.HeaderTimeout)
		c.t.onUnread(http.StatusRequestTimeout, ReasonHeaderTimeout, sentence)
		_ = c.idleConn.SetWriteDeadline(time.Now().Add(time.Second))
		writeRefusal(c.idleConn, http.StatusRequestTimeout, sentence)
	}
	c.t.mu.Lock()
	c.t.dropLocked(c)
	c.t.mu.Unlock()
	return c.idleConn.Close()
}

// trackingListener admits each accepted connection; one the proxy has no room for is answered with a refusal for
// load and closed, and the listener goes on accepting.
type trackingListener struct {
	net.Listener
	t *connTracker
}

func (l *trackingListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		tc := &trackedConn{t: l.t}
		tc.idleConn = newIdleConn(c, l.t.limits.IdleTimeout, func() { _ = tc.Close() })
		if l.t.admit(tc) {
			return tc, nil
		}
		tc.idleConn.stop()
		sentence := loadSentence("all nodes together", l.t.limits.MaxConns)
		l.t.onLoad(sentence)
		go func() {
			_ = c.SetWriteDeadline(time.Now().Add(time.Second))
			writeRefusal(c, http.StatusServiceUnavailable, sentence)
			_ = c.Close()
		}()
	}
}

type connKey struct{}

// connContext keeps the tracked connection in each of its requests' contexts (http.Server.ConnContext).
func connContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*trackedConn); ok {
		return context.WithValue(ctx, connKey{}, tc)
	}
	return ctx
}

func (t *connTracker) connState(c net.Conn, st http.ConnState) {
	if tc, ok := c.(*trackedConn); ok && st == http.StateHijacked {
		t.hijacked(tc)
	}
}

// idleConn closes its connection after a period without a completed read or write, whichever side is quiet: a
// parked keep-alive, a silent tunnel and a stalled upstream all end. A read or a write only notes the time (on the
// monotonic clock, a few nanoseconds); the timer, when it fires, looks at how long the connection has been quiet
// and either ends it or waits for the rest of the period, so that a stream of small events does not reset a timer
// for every one of them.
type idleConn struct {
	net.Conn
	*idleWatch
}

// idleWatch is an idleConn's clock and timer, shared by its copies.
type idleWatch struct {
	idle    time.Duration
	last    atomic.Int64 // monotonic() when a read or a write last completed
	timer   atomic.Pointer[time.Timer]
	stopped atomic.Bool
	onIdle  func()
}

// clockStart anchors monotonic: time.Since reads the monotonic clock, so a change of the wall clock never ends a
// connection early.
var clockStart = time.Now()

func monotonic() int64 { return int64(time.Since(clockStart)) }

// newIdleConn watches c: onIdle runs once c has been quiet for idle (by default, c is closed).
func newIdleConn(c net.Conn, idle time.Duration, onIdle func()) idleConn {
	if onIdle == nil {
		onIdle = func() { _ = c.Close() }
	}
	w := &idleWatch{idle: idle, onIdle: onIdle}
	w.last.Store(monotonic())
	t := time.AfterFunc(time.Duration(1<<62), w.fire) // armed below, once the timer is where fire finds it
	w.timer.Store(t)
	t.Reset(idle)
	return idleConn{Conn: c, idleWatch: w}
}

func (w *idleWatch) fire() {
	if w.stopped.Load() {
		return
	}
	if quiet := time.Duration(monotonic() - w.last.Load()); quiet < w.idle {
		w.timer.Load().Reset(w.idle - quiet)
		return
	}
	w.onIdle()
}

func (c idleConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.last.Store(monotonic())
	}
	return n, err
}

func (c idleConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if n > 0 {
		c.last.Store(monotonic())
	}
	return n, err
}

func (c idleConn) Close() error {
	c.stop()
	return c.Conn.Close()
}

func (w *idleWatch) stop() {
	w.stopped.Store(true)
	w.timer.Load().Stop()
}

// CloseWrite and CloseRead keep a tunnel's half-close (goproxy uses them when both ends have them).
func (c idleConn) CloseWrite() error { return closeWrite(c.Conn) }

func (c idleConn) CloseRead() error { return closeRead(c.Conn) }

func closeWrite(c net.Conn) error {
	if h, ok := c.(interface{ CloseWrite() error }); ok {
		return h.CloseWrite()
	}
	return errors.ErrUnsupported
}

func closeRead(c net.Conn) error {
	if h, ok := c.(interface{ CloseRead() error }); ok {
		return h.CloseRead()
	}
	return errors.ErrUnsupported
}
