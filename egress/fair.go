package egress

import (
	"net"
	"sync/atomic"
	"time"
)

// Fair scheduling of tunnels. A CONNECT tunnel is two copy loops (goproxy's io.Copy), each reading a piece from one
// side and writing it to the other, and Go schedules goroutines, not nodes: a node with 128 busy tunnels would get
// 128 times the proxy's copying of a node with one. So every write a tunnel makes, either way, first takes one of
// its node's tunnel slots (Limits.TunnelSlots, a few per node): however many tunnels a node opens, only that many
// of its pieces are being written at once, the rest of its tunnels wait with the piece they read (and read nothing
// more), and another node's tunnel finds the proxy's cores shared by the nodes rather than by the connections.
// Slots are per node, never shared between nodes, so a node whose writes stall (a client that stops reading) can
// only ever slow itself; and a slot is given back after SlotHold even while its write is still blocked, so a few
// stalled tunnels of a node do not stop its others for longer than that. Plain HTTP forwards and brokered requests
// are not tunnels: their upstream connections are pooled across nodes, and the per-node request bound covers them.

// Default tunnel slots per node, and how long one write may hold a slot.
const (
	DefaultTunnelSlots = 2
	SlotHold           = time.Second
)

// tunnelShare is one node's tunnel slots.
type tunnelShare struct {
	slots chan struct{}
	hold  time.Duration // SlotHold
}

func newTunnelShare(n int) *tunnelShare {
	return &tunnelShare{slots: make(chan struct{}, n), hold: SlotHold}
}

// write writes p with w while holding one of the share's slots; nil share writes at once.
func (s *tunnelShare) write(w func([]byte) (int, error), p []byte) (int, error) {
	if s == nil {
		return w(p)
	}
	s.slots <- struct{}{}
	var released atomic.Bool
	release := func() {
		if released.CompareAndSwap(false, true) {
			<-s.slots
		}
	}
	valve := time.AfterFunc(s.hold, release) // a stalled write gives its slot back
	n, err := w(p)
	valve.Stop()
	release()
	return n, err
}

// fairConn is a tunnel's upstream connection: its writes take the node's tunnel slots. It keeps the half-close of
// the connection it wraps (goproxy half-closes a tunnel's sides when both have it).
type fairConn struct {
	net.Conn
	share *tunnelShare
}

func (c fairConn) Write(p []byte) (int, error) { return c.share.write(c.Conn.Write, p) }

func (c fairConn) CloseWrite() error { return closeWrite(c.Conn) }

func (c fairConn) CloseRead() error { return closeRead(c.Conn) }
