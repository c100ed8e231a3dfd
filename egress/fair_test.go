package egress

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// blockingWrites is a write function whose calls wait until released, counting those in progress and announcing
// each start on started (when set).
type blockingWrites struct {
	now, most atomic.Int32
	release   chan struct{}
	started   chan struct{}
}

func (b *blockingWrites) write(p []byte) (int, error) {
	n := b.now.Add(1)
	for m := b.most.Load(); n > m && !b.most.CompareAndSwap(m, n); m = b.most.Load() {
	}
	if b.started != nil {
		b.started <- struct{}{}
	}
	<-b.release
	b.now.Add(-1)
	return len(p), nil
}

// TestTunnelShareBoundsANode: however many of a node's tunnels write at once, only its slots' worth are writing;
// the others wait, and each gets its turn.
func TestTunnelShareBoundsANode(t *testing.T) {
	s := newTunnelShare(2)
	s.hold = time.Hour // no valve in this test
	bw := &blockingWrites{release: make(chan struct{}), started: make(chan struct{}, 10)}
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() { _, _ = s.write(bw.write, []byte("x")) })
	}
	<-bw.started // both slots taken
	<-bw.started
	for i := 0; i < 10; i++ {
		bw.release <- struct{}{} // one write ends; a waiter takes the freed slot
		if i < 8 {
			<-bw.started
		}
	}
	wg.Wait()
	if got := bw.most.Load(); got != 2 {
		t.Errorf("at most %d writes in progress at once, want the node's 2 slots", got)
	}
}

// TestTunnelShareValve: a write that stalls gives its slot back after the hold, so the node's other tunnels go on;
// another node's slots are never taken by it.
func TestTunnelShareValve(t *testing.T) {
	s := newTunnelShare(1)
	s.hold = 20 * time.Millisecond
	stalled := &blockingWrites{release: make(chan struct{})}
	done := make(chan struct{})
	go func() { _, _ = s.write(stalled.write, []byte("x")); close(done) }()
	other := newTunnelShare(1)
	if n, err := other.write(func(p []byte) (int, error) { return len(p), nil }, []byte("yz")); n != 2 || err != nil {
		t.Fatalf("another node's write: %d %v", n, err)
	}
	wrote := make(chan struct{})
	go func() {
		_, _ = s.write(func(p []byte) (int, error) { return len(p), nil }, []byte("y")) // waits for the valve
		close(wrote)
	}()
	select {
	case <-wrote:
	case <-time.After(time.Minute):
		t.Fatal("the node's second write never got the slot its stalled write held")
	}
	close(stalled.release)
	<-done
	if len(s.slots) != 0 {
		t.Errorf("%d slots still held after every write ended", len(s.slots))
	}
}

// openTunnel opens a CONNECT tunnel through proxy as user.
func openTunnel(tb testing.TB, proxy, target, user, secret string) net.Conn {
	tb.Helper()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		tb.Fatal(err)
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: %s\r\n\r\n", target, target, basic(user, secret))
	res, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil || res.StatusCode != http.StatusOK {
		tb.Fatalf("CONNECT as %s: %v %v", user, res, err)
	}
	return c
}

// TestStalledTunnelsStopOnlyTheirNode: a node whose tunnels' clients stop reading while their upstream keeps
// sending (every write to them stalls) holds its own slots only; another node's tunnel moves its bytes.
func TestStalledTunnelsStopOnlyTheirNode(t *testing.T) {
	source := tcpUpstream(t, func(c net.Conn) { // sends until the tunnel is closed
		buf := make([]byte, 64<<10)
		for {
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	})
	sink := sinkUpstream(t, 0)
	src, dst := fmt.Sprintf("source.test:%d", source), fmt.Sprintf("sink.test:%d", sink)
	proxy := benchProxy(t, &Config{Nodes: []NodeConfig{
		{Name: "fix", Secret: secretFix, Allow: []string{dst}},
		{Name: "review", Secret: secretReview, Allow: []string{src}},
	}})
	for range 8 { // review's clients never read: the proxy's writes to them stall once the buffers are full
		c := openTunnel(t, proxy, src, "review", secretReview)
		t.Cleanup(func() { _ = c.Close() })
	}
	c := openTunnel(t, proxy, dst, "fix", secretFix)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
	sendAll(t, c, bufio.NewReader(c), 16<<20)
}

// BenchmarkTunnelFairness: one node's tunnel sends to a sink alone, then while another node sends through 64
// tunnels of its own, through a proxy in a process of its own (startProxyProc). victim-share is the first node's
// throughput then over its throughput alone; victim-fraction its part of everything the proxy moved meanwhile
// (scheduled by connection it would be 1/65; shared evenly by the two nodes, 1/2). The senders and the sink are in
// the test process, where Go schedules them by goroutine: they take their part of the two cores whatever the
// proxy does.
func BenchmarkTunnelFairness(b *testing.B) {
	port := sinkUpstream(b, 0)
	target := fmt.Sprintf("sink.test:%d", port)
	proxy := startProxyProc(b, "fairness", &Config{Nodes: []NodeConfig{
		{Name: "fix", Secret: secretFix, Allow: []string{target}},
		{Name: "review", Secret: secretReview, Allow: []string{target}},
	}}, false).addr
	const window = time.Second
	send := func(c net.Conn, stop <-chan struct{}, n *atomic.Int64) {
		buf := make([]byte, 32<<10)
		for {
			select {
			case <-stop:
				return
			default:
			}
			k, err := c.Write(buf)
			n.Add(int64(k))
			if err != nil {
				return
			}
		}
	}
	// rate sends through c for the window and returns MiB/s.
	rate := func(c net.Conn) float64 {
		var n atomic.Int64
		stop := make(chan struct{})
		time.AfterFunc(window, func() { close(stop) })
		start := time.Now()
		send(c, stop, &n)
		return float64(n.Load()) / time.Since(start).Seconds() / (1 << 20)
	}
	var alone, flooded, others float64
	for i := 0; i < b.N; i++ {
		c := openTunnel(b, proxy, target, "fix", secretFix)
		alone += rate(c)
		stop := make(chan struct{})
		var floodBytes atomic.Int64
		var wg sync.WaitGroup
		for range 64 {
			fc := openTunnel(b, proxy, target, "review", secretReview)
			wg.Go(func() { defer fc.Close(); send(fc, stop, &floodBytes) })
		}
		before, start := floodBytes.Load(), time.Now()
		flooded += rate(c)
		others += float64(floodBytes.Load()-before) / time.Since(start).Seconds() / (1 << 20)
		close(stop)
		wg.Wait()
		_ = c.Close()
	}
	n := float64(b.N)
	b.ReportMetric(alone/n, "alone-MiB/s")
	b.ReportMetric(flooded/n, "flooded-MiB/s")
	b.ReportMetric(others/n, "flood-MiB/s")
	b.ReportMetric(flooded/alone, "victim-share")
	b.ReportMetric(flooded/(flooded+others), "victim-fraction")
}
