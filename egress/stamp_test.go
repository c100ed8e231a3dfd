package egress

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// stampedConn is a TCP connection that notes, on every read, when the kernel received the bytes the read returned:
// the socket's receive timestamp (SO_TIMESTAMPNS; for TCP, that of the last segment the read consumed), not the
// moment this process got round to reading them. An event's latency measured to its stamp is its trip to the
// agent's socket: how long the stand-in and the proxy took, without how long the agent's goroutine waited for a
// core. When a read takes several segments at once, the earlier ones are stamped with the last one's time, which
// errs towards a longer trip.
type stampedConn struct {
	*net.TCPConn
	raw   syscall.RawConn
	oob   []byte
	last  atomic.Int64 // the latest read's stamp, in Unix nanoseconds; 0 when it came without one
	reads atomic.Int64 // how many reads returned bytes
}

// dialStamped dials a TCP connection with receive timestamps on (an http.Transport's DialContext).
func dialStamped(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
		}); err != nil {
			return err
		}
		return serr
	}}
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	tc := c.(*net.TCPConn)
	raw, err := tc.SyscallConn()
	if err != nil {
		c.Close()
		return nil, err
	}
	return &stampedConn{TCPConn: tc, raw: raw, oob: make([]byte, unix.CmsgSpace(16))}, nil
}

func (c *stampedConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n, oobn int
	var rerr error
	if err := c.raw.Read(func(fd uintptr) bool {
		n, oobn, _, _, rerr = unix.Recvmsg(int(fd), p, c.oob, 0)
		return rerr != unix.EAGAIN
	}); err != nil {
		return 0, err
	}
	if rerr != nil {
		return 0, rerr
	}
	if n == 0 {
		return 0, io.EOF
	}
	// A segment the kernel received before its timestamps were switched on (they are switched on for the whole
	// system, a moment after the first socket asks) comes without one: 0, which every user of the stamp takes as
	// unknown and replaces with the bound that errs towards a longer trip.
	stamp, _ := receiveStamp(c.oob[:oobn])
	c.last.Store(stamp)
	c.reads.Add(1)
	return n, nil
}

// receiveStamp is the SCM_TIMESTAMPNS time in a read's control messages, in Unix nanoseconds.
func receiveStamp(oob []byte) (int64, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0, false
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS && len(m.Data) >= 16 {
			sec := int64(binary.NativeEndian.Uint64(m.Data[0:8]))
			nsec := int64(binary.NativeEndian.Uint64(m.Data[8:16]))
			return sec*int64(time.Second) + nsec, true
		}
	}
	return 0, false
}

// stampOf is the stampedConn under c (a TLS connection's own connection, an idleConn's), or an error.
func stampOf(c net.Conn) (*stampedConn, error) {
	for {
		switch x := c.(type) {
		case *stampedConn:
			return x, nil
		case idleConn: // the proxy's upstream connections
			c = x.Conn
		case interface{ NetConn() net.Conn }:
			c = x.NetConn()
		default:
			return nil, fmt.Errorf("the agent's connection %T has no receive timestamps", c)
		}
	}
}

// sseEventFormat is the stand-in's server-sent event (sseStandIn): a number of its own across every stream, and
// the time the stand-in handed it to its connection, in Unix nanoseconds.
const sseEventFormat = `data: {"type":"content_block_delta","id":%d,"sent":%d}`

// parseSSEEvent reads an event line of sseEventFormat. It runs in the proxy's path for every event, so it parses by
// hand: fmt.Sscanf cost the proxy several percent of its CPU.
func parseSSEEvent(line string) (id, sent int64, ok bool) {
	rest, ok := strings.CutPrefix(line, `data: {"type":"content_block_delta","id":`)
	if !ok {
		return 0, 0, false
	}
	ids, rest, ok := strings.Cut(rest, `,"sent":`)
	if !ok {
		return 0, 0, false
	}
	sents, ok := strings.CutSuffix(rest, "}")
	if !ok {
		return 0, 0, false
	}
	id, err1 := strconv.ParseInt(ids, 10, 64)
	sent, err2 := strconv.ParseInt(sents, 10, 64)
	return id, sent, err1 == nil && err2 == nil
}

// arrival is when the kernel received an event at the proxy's connection to the stand-in (0 when its segment came
// without a stamp). Shared is set when the proxy took it from its socket in one read with the next event of its
// stream: TCP then reports only the later segment's time, and the event's own arrival is unknown.
type arrival struct {
	At     int64 `json:"at"`
	Read   int64 `json:"read"`
	Shared bool  `json:"shared,omitempty"`
}

// upstreamStamps note when each of the stand-in's events reached the proxy: a test's instrument of the proxy,
// which dials the stand-in over stampedConns (dial) and reads each answer through a stampingBody (wrap).
type upstreamStamps struct {
	mu sync.Mutex
	at map[int64]arrival
}

func newUpstreamStamps() *upstreamStamps { return &upstreamStamps{at: map[int64]arrival{}} }

// dial is an Options.Dial over stampedConns.
func (u *upstreamStamps) dial(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
	return dialStamped(ctx, "tcp", addr.String())
}

// wrap has the server's broker read every answer through a stampingBody.
func (u *upstreamStamps) wrap(s *Server) {
	next := s.broker.proxy.Transport
	s.broker.proxy.Transport = roundTripFunc(func(req *http.Request) (*http.Response, error) {
		var conn net.Conn
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) { conn = info.Conn }}))
		res, err := next.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		sc, err := stampOf(conn)
		if err != nil {
			res.Body.Close()
			return nil, err
		}
		res.Body = &stampingBody{ReadCloser: res.Body, conn: sc, stamps: u}
		return res, nil
	})
}

// take returns the arrivals noted so far and forgets them.
func (u *upstreamStamps) take() map[int64]arrival {
	u.mu.Lock()
	defer u.mu.Unlock()
	at := u.at
	u.at = map[int64]arrival{}
	return at
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// stampingBody is an answer's body that notes, for each event it passes on, the receive stamp of the read of the
// proxy's connection that completed it.
type stampingBody struct {
	io.ReadCloser
	conn    *stampedConn
	stamps  *upstreamStamps
	partial []byte
	// prev is the event before, and the connection's read count when it completed.
	prev      int64
	prevReads int64
}

func (b *stampingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.partial = append(b.partial, p[:n]...)
	for {
		i := bytes.IndexByte(b.partial, '\n')
		if i < 0 {
			break
		}
		if id, _, ok := parseSSEEvent(string(b.partial[:i])); ok {
			reads := b.conn.reads.Load()
			b.stamps.mu.Lock()
			if b.prev != 0 && b.prevReads == reads {
				a := b.stamps.at[b.prev]
				a.Shared = true
				b.stamps.at[b.prev] = a
			}
			b.stamps.at[id] = arrival{At: b.conn.last.Load(), Read: time.Now().UnixNano()}
			b.stamps.mu.Unlock()
			b.prev, b.prevReads = id, reads
		}
		b.partial = b.partial[i+1:]
	}
	return n, err
}

// TestStampedConn checks the instrument of the latency benchmarks: a read of a stampedConn carries the kernel's
// receive time of its bytes, after they were written and before they were read, and an event line parses.
func TestStampedConn(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := dialStamped(context.Background(), "tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	peer, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	sc, err := stampOf(c)
	if err != nil {
		t.Fatal(err)
	}
	// The kernel switches receive timestamps on for the whole system a moment after the first socket asks (from
	// its work queue): until then a segment comes without one. Exchange lines until one comes stamped.
	buf := make([]byte, 256)
	var line string
	var n int
	for deadline := time.Now().Add(10 * time.Second); ; {
		line = fmt.Sprintf(sseEventFormat, 7, time.Now().UnixNano())
		before := time.Now().UnixNano()
		if _, err := io.WriteString(peer, line+"\n"); err != nil {
			t.Fatal(err)
		}
		if n, err = c.Read(buf); err != nil {
			t.Fatal(err)
		}
		after := time.Now().UnixNano()
		if at := sc.last.Load(); at != 0 {
			if at < before || at > after {
				t.Errorf("receive stamp %d, want between the write (%d) and the read (%d)", at, before, after)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no read came with the kernel's receive timestamp within 10 s")
		}
	}
	id, sent, ok := parseSSEEvent(strings.TrimSuffix(string(buf[:n]), "\n"))
	if !ok || id != 7 || string(buf[:n]) != line+"\n" || sent == 0 {
		t.Errorf("parseSSEEvent(%q) = %d, %d, %v", buf[:n], id, sent, ok)
	}
	if _, _, ok := parseSSEEvent(`data: {"type":"content_block_delta","id":7,"sent":x}`); ok {
		t.Error("a malformed event line parsed")
	}
}
