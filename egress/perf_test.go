package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The proxy's performance goals, as ratios measured in one run (make bench runs them): a CONNECT tunnel's
// throughput against a direct connection, and how soon a server-sent event the upstream writes reaches the agent
// through the broker.

// sinkUpstream is a TCP server on loopback that reads everything it is sent and answers the byte count once the
// sender closes its side. With rate > 0 it reads at most rate bytes a second: a link's speed, not loopback's.
func sinkUpstream(tb testing.TB, rate int64) int {
	return tcpUpstream(tb, func(c net.Conn) {
		var n int64
		start := time.Now()
		buf := make([]byte, 64<<10)
		for {
			k, err := c.Read(buf)
			n += int64(k)
			if err != nil {
				break
			}
			if rate > 0 {
				if ahead := time.Duration(n*int64(time.Second)/rate) - time.Since(start); ahead > 0 {
					time.Sleep(ahead) // the link's pace
				}
			}
		}
		fmt.Fprintf(c, "%d\n", n)
	})
}

// loopbackOptions make a benchmark's proxy: every name resolves to 127.0.0.1, where the stand-ins listen.
func loopbackOptions() Options {
	return Options{
		Resolve: func(context.Context, string) ([]netip.Addr, error) {
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		},
		AddressAllowed: func(a netip.Addr) bool { return a.IsLoopback() },
	}
}

// benchProxy runs a proxy on loopback in the test process for a benchmark (startProxyProc runs one in a process
// of its own).
func benchProxy(tb testing.TB, cfg *Config) string { return benchProxyStamped(tb, cfg, nil) }

// benchProxyStamped is benchProxy with the proxy's arrivals noted in stamps, when set.
func benchProxyStamped(tb testing.TB, cfg *Config, stamps *upstreamStamps) string {
	tb.Helper()
	cfg.Listen = "127.0.0.1:0"
	opts := loopbackOptions()
	if stamps != nil {
		opts.Dial = stamps.dial
	}
	s, err := NewServer(cfg, io.Discard, opts)
	if err != nil {
		tb.Fatal(err)
	}
	if stamps != nil {
		stamps.wrap(s)
	}
	h := httptest.NewServer(s)
	tb.Cleanup(h.Close)
	return strings.TrimPrefix(h.URL, "http://")
}

// sendAll writes size bytes to c, closes its write side and waits for the sink's count.
func sendAll(tb testing.TB, c net.Conn, r *bufio.Reader, size int) {
	tb.Helper()
	buf := make([]byte, 256<<10)
	for left := size; left > 0; left -= len(buf) {
		if _, err := c.Write(buf[:min(len(buf), left)]); err != nil {
			tb.Fatal(err)
		}
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	line, err := r.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != fmt.Sprint(size) {
		tb.Fatalf("the sink counted %q (%v), want %d", line, err, size)
	}
}

// BenchmarkConnectThroughput moves 64 MiB through a CONNECT tunnel and over a direct connection to the same sink,
// alternately; throughput-ratio is the tunnel's median throughput over the direct one's (goal: at least 0.9). The
// sink reads at 1 Gbit/s, the link an agent reaches a git host or a package mirror over, so the ratio says whether
// the tunnel keeps up with such a link; BenchmarkConnectThroughputLoopback is the same without the link, where
// both sides are bound by this machine's CPU and the tunnel's extra hop costs what the copies cost.
func BenchmarkConnectThroughput(b *testing.B) { benchConnect(b, 125_000_000) }

// BenchmarkConnectThroughputLoopback is BenchmarkConnectThroughput with an unbounded sink.
func BenchmarkConnectThroughputLoopback(b *testing.B) { benchConnect(b, 0) }

func benchConnect(b *testing.B, rate int64) {
	const size = 64 << 20
	port := sinkUpstream(b, rate)
	target := fmt.Sprintf("sink.test:%d", port)
	proxy := benchProxy(b, &Config{Nodes: []NodeConfig{{Name: "fix", Secret: secretFix, Allow: []string{target}}}})
	direct := func() time.Duration {
		start := time.Now()
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		sendAll(b, c, bufio.NewReader(c), size)
		return time.Since(start)
	}
	tunnel := func() time.Duration {
		start := time.Now()
		c, err := net.Dial("tcp", proxy)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: %s\r\n\r\n", target, target, basic("fix", secretFix))
		br := bufio.NewReader(c)
		res, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil || res.StatusCode != http.StatusOK {
			b.Fatalf("CONNECT: %v %v", res, err)
		}
		sendAll(b, c, br, size)
		return time.Since(start)
	}
	direct()
	tunnel()
	var ds, ts []time.Duration
	b.SetBytes(size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ds = append(ds, direct())
		ts = append(ts, tunnel())
	}
	b.StopTimer()
	md, mt := medianDuration(ds), medianDuration(ts)
	b.ReportMetric(float64(size)/md.Seconds()/(1<<20), "direct-MiB/s")
	b.ReportMetric(float64(size)/mt.Seconds()/(1<<20), "tunnel-MiB/s")
	b.ReportMetric(md.Seconds()/mt.Seconds(), "throughput-ratio")
}

// eventPace is the stand-in's pace of server-sent events: a model's tokens.
const eventPace = 2 * time.Millisecond

// sseStandIn is a TLS stand-in for api.anthropic.com that answers every request with events server-sent events,
// each carrying the time it was handed to the connection, one every eventPace on an absolute schedule that starts
// at a random phase within the first eventPace. Real agents' token streams are independent of one another, not
// phase-locked: streams that all started at one instant and slept the same 2 ms would hand the proxy bursts of
// one event from each at the same moment, which no set of agents does. An event the stand-in sends late does not
// push the schedule of the ones after it.
func sseStandIn(b *testing.B, ca testCA, events int) string {
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		next := time.Now().Add(rand.N(eventPace))
		for range events {
			time.Sleep(time.Until(next)) // the pace of a model's tokens; what is measured is each event's trip
			fmt.Fprintf(w, "event: content_block_delta\n"+sseEventFormat+"\n\n", eventIDs.Add(1), time.Now().UnixNano())
			f.Flush()
			next = next.Add(eventPace)
		}
	}))
	up.TLS = &tls.Config{Certificates: []tls.Certificate{ca.leaf}}
	up.StartTLS()
	b.Cleanup(up.Close)
	return fmt.Sprintf("api.anthropic.com:%d", up.Listener.Addr().(*net.TCPAddr).Port)
}

// eventIDs number the stand-ins' events across every stream.
var eventIDs atomic.Int64

// brokeredNode is a node config with a broker to ep, its placeholder ph standing for a key of its own.
func brokeredNode(name, secret, ep, ph string) NodeConfig {
	return NodeConfig{Name: name, Secret: secret, Broker: &BrokerConfig{API: BrokerAPIAnthropic, Paths: anthropicTestPaths, Endpoints: []string{ep}, Price: sonnetPrice,
		Credentials: []BrokerCredential{{Name: "ANTHROPIC_API_KEY", Placeholder: ph, Value: realFixKey, Header: "x-api-key"}}}}
}

// trips are the events of one stream, each one's trip from the moment the stand-in handed it to its connection:
// to the agent's socket (the kernel's receive timestamp, stampedConn) and to the agent's read of it, and, once
// holds has the proxy's arrivals, how long the proxy held it and how long its own work on it took. The trip to the
// socket is what the stand-in and the proxy took; the trip to the read adds how long the agent's goroutine waited
// for a core; the hold is the proxy's part alone: the wait until a proxy thread read the event, and the work from
// that read to the write that put it on the agent's socket.
type trips struct {
	socket, read, hold []time.Duration
	work               []time.Duration // from the proxy's read of the event to the agent's socket
	ids, sent, at      []int64         // each event's number, the stand-in's time and the agent's socket's, Unix ns
}

// holds sets each event's hold: from its arrival at the proxy's socket (at, the proxy's upstreamStamps) to its
// arrival at the agent's. An event whose own arrival is unknown (arrival.Shared, or no stamp) is taken to have
// arrived when the stand-in wrote it, which errs towards a longer hold.
func (t *trips) holds(at map[int64]arrival) error {
	t.hold, t.work = t.hold[:0], t.work[:0]
	for i, id := range t.ids {
		a, ok := at[id]
		if !ok {
			return fmt.Errorf("the proxy noted no arrival of event %d", id)
		}
		from := a.At
		if a.Shared || from < t.sent[i] {
			from = t.sent[i]
		}
		t.hold = append(t.hold, time.Duration(t.at[i]-from))
		t.work = append(t.work, time.Duration(t.at[i]-a.Read))
	}
	return nil
}

// stampedTransport is an agent's transport whose connections note their receive timestamps.
func stampedTransport(nodes int, tlsConfig *tls.Config) *http.Transport {
	return &http.Transport{Proxy: nil, MaxIdleConnsPerHost: nodes, DialContext: dialStamped, TLSClientConfig: tlsConfig}
}

// streamLatencies makes one streamed request as node through the broker (client's transport a stampedTransport)
// and returns its events' trips.
func streamLatencies(client *http.Client, proxy, node, ep, ph string, events int) (trips, error) {
	req, _ := http.NewRequest(http.MethodPost, "http://"+proxy+BrokerPathPrefix+node+"/"+ep+"/v1/messages", strings.NewReader(`{"stream":true}`))
	req.Header.Set("x-api-key", ph)
	var conn net.Conn
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { conn = info.Conn }}))
	res, err := client.Do(req)
	if err != nil {
		return trips{}, fmt.Errorf("node %s: %w", node, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		return trips{}, fmt.Errorf("node %s: answered %s: %s", node, res.Status, body)
	}
	sc, err := stampOf(conn)
	if err != nil {
		return trips{}, fmt.Errorf("node %s: %w", node, err)
	}
	t, err := eventTrips(res.Body, sc, events)
	if err != nil {
		return trips{}, fmt.Errorf("node %s: %w", node, err)
	}
	return t, nil
}

// eventTrips reads the stand-in's events from body, which sc carries: each one's trip from the stand-in's write to
// sc's socket and to this read.
func eventTrips(body io.Reader, sc *stampedConn, events int) (trips, error) {
	var t trips
	lines := bufio.NewScanner(body)
	for lines.Scan() {
		if id, sent, ok := parseSSEEvent(lines.Text()); ok {
			read, at := time.Now().UnixNano(), sc.last.Load()
			if at == 0 {
				at = read // a segment without its stamp: its read is when it is known to have arrived
			}
			t.socket = append(t.socket, time.Duration(at-sent))
			t.read = append(t.read, time.Duration(read-sent))
			t.ids, t.sent, t.at = append(t.ids, id), append(t.sent, sent), append(t.at, at)
		}
	}
	if err := lines.Err(); err != nil {
		return trips{}, err
	}
	if len(t.read) != events {
		return trips{}, fmt.Errorf("got %d events of %d", len(t.read), events)
	}
	return t, nil
}

func percentile(lat []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), lat...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)*p/100]
}

// BenchmarkBrokerSSELatency has the TLS stand-in write 200 server-sent events, one every 2 ms, and measures how
// long each takes to reach the agent through the broker, from the moment the stand-in hands it to its connection:
// an upper bound of the time the proxy holds it (goal: p99 under 1 ms).
func BenchmarkBrokerSSELatency(b *testing.B) {
	const events = 200
	ca := newTestCA(b)
	ep := sseStandIn(b, ca, events)
	stamps := newUpstreamStamps()
	proxy := benchProxyStamped(b, &Config{UpstreamCAPEM: ca.pem, Nodes: []NodeConfig{brokeredNode("fix", secretFix, ep, phFixKey)}}, stamps)
	book := newArrivalBook(func() (map[int64]arrival, error) { return stamps.take(), nil })
	client := &http.Client{Transport: stampedTransport(1, nil)}
	var read, hold []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t, err := streamLatencies(client, proxy, "fix/"+BrokerIdentity("fix", secretFix), ep, phFixKey, events)
		if err == nil {
			err = book.holds(&t)
		}
		if err != nil {
			b.Fatal(err)
		}
		read, hold = append(read, t.read...), append(hold, t.hold...)
	}
	b.StopTimer()
	b.ReportMetric(float64(percentile(read, 50).Microseconds()), "p50-µs")
	b.ReportMetric(float64(percentile(read, 99).Microseconds()), "p99-µs")
	b.ReportMetric(float64(percentile(hold, 99).Microseconds()), "hold-p99-µs")
}

// BenchmarkBrokerSSELatencyConcurrent: 8 nodes stream through one proxy at once, and each node's p99 event
// latency is compared with its p99 streaming alone at a proxy (goal: the worst node's p99-ratio at most 2).
//
// An event's latency at the proxy is its hold (trips): from the moment the kernel received it on the proxy's
// connection to the stand-in to the moment it received it on the agent's connection, which the proxy's write puts
// it on. That is the whole of the proxy's part, its waits for a core included, and none of the stand-in's or the
// agent's; socket-p99-ratio-worst is the same comparison from the stand-in's write to the agent's socket,
// read-p99-ratio-worst to the agent's read.
//
// p99-ratio-worst: "alone" is each node streaming through a proxy of its own while the others stream through
// theirs, eight proxy processes against one with the same eight streams, stand-in and agents on the machine's
// cores both times: the ratio is what sharing one proxy costs a node. Eight processes spend more CPU than one on
// the same streams (cpu-ratio is the shared proxy's CPU over theirs), which weighs on the "alone" side.
// quiet-p99-ratio-worst compares instead with each node streaming alone on the machine, one after the other:
// there the stand-in's and the agents' work for the seven other streams is missing from one side, and on two
// cores the waits for a core it causes are most of the together p99. work-p99-ratio-worst is that comparison of
// the proxy's own work alone, from its read of an event to its write. steal-% is the share of the machine's CPU
// time the hypervisor took for other guests during the run.
//
// The proxies run in processes of their own, as in production, where the proxy is its own container: in the test
// process their goroutines would be scheduled together with the stand-in's and the agents' by one runtime, and an
// event would never wait for the system to run another process.
func BenchmarkBrokerSSELatencyConcurrent(b *testing.B) {
	const nodes = 8
	ca := newTestCA(b)
	ep := sseStandIn(b, ca, latencyEvents)
	cfg := &Config{UpstreamCAPEM: ca.pem}
	phs := make([]string, nodes)
	for i := range phs {
		ph, err := NewPlaceholder()
		if err != nil {
			b.Fatal(err)
		}
		phs[i] = ph
		cfg.Nodes = append(cfg.Nodes, brokeredNode(fmt.Sprintf("n%d", i), fmt.Sprintf("%s-%d", secretFix, i), ep, ph))
	}
	shared := startProxyProcSpec(b, "shared", proxyProcSpec{Config: cfg, Stamps: true})
	own := make([]*proxyProc, nodes)
	for n := range own {
		own[n] = startProxyProcSpec(b, fmt.Sprintf("own-%d", n),
			proxyProcSpec{Config: &Config{UpstreamCAPEM: ca.pem, Nodes: []NodeConfig{cfg.Nodes[n]}}, Stamps: true})
	}
	book := newArrivalBook(func() (map[int64]arrival, error) {
		at := map[int64]arrival{}
		for _, p := range append([]*proxyProc{shared}, own...) {
			more, err := p.arrivals()
			if err != nil {
				return nil, err
			}
			maps.Copy(at, more)
		}
		return at, nil
	})
	client := &http.Client{Transport: stampedTransport(nodes, nil)}
	through := func(proxy func(n int) *proxyProc) func(n int) (trips, error) {
		return func(n int) (trips, error) {
			t, err := streamLatencies(client, proxy(n).addr, fmt.Sprintf("n%d/", n)+BrokerIdentity(fmt.Sprintf("n%d", n), fmt.Sprintf("%s-%d", secretFix, n)), ep, phs[n], latencyEvents)
			if err != nil {
				return trips{}, err
			}
			return t, book.holds(&t)
		}
	}
	together := through(func(int) *proxyProc { return shared })
	alone := through(func(n int) *proxyProc { return own[n] })
	ownCPU := func() (d time.Duration) {
		for _, p := range own {
			d += p.cpu(b)
		}
		return d
	}
	var worst, quiet p99Ratios
	var sharedCPU, ownsCPU time.Duration
	steal0, stealErr := cpuSteal()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s0, o0 := shared.cpu(b), ownCPU()
		worst = worst.max(worstP99Ratio(b, nodes, sharedRounds, alone, together, true))
		sharedCPU, ownsCPU = sharedCPU+shared.cpu(b)-s0, ownsCPU+ownCPU()-o0
		quiet = quiet.max(worstP99Ratio(b, nodes, quietRounds, together, together, false))
	}
	b.StopTimer()
	if steal1, err := cpuSteal(); err == nil && stealErr == nil {
		b.ReportMetric(100*float64(steal1.steal-steal0.steal)/float64(steal1.total-steal0.total), "steal-%")
	}
	b.ReportMetric(sharedCPU.Seconds()/ownsCPU.Seconds(), "cpu-ratio")
	b.ReportMetric(worst.hold.ratio, "p99-ratio-worst")
	b.ReportMetric(float64(worst.hold.alone.Microseconds()), "alone-p99-µs")
	b.ReportMetric(float64(worst.hold.together.Microseconds()), "together-p99-µs")
	b.ReportMetric(worst.socket.ratio, "socket-p99-ratio-worst")
	b.ReportMetric(worst.read.ratio, "read-p99-ratio-worst")
	b.ReportMetric(quiet.hold.ratio, "quiet-p99-ratio-worst")
	b.ReportMetric(quiet.work.ratio, "work-p99-ratio-worst")
}

// latencyEvents is how many events one stream of the concurrency benchmark carries; sharedRounds and quietRounds
// are how many times each node streams alone and together in its two comparisons. A node's p99 is over all its
// streams of a kind: 2000 events against a proxy of its own, so that it is the twentieth worst, and 1000 alone on
// the machine, where each node's turn alone takes a second of its own.
const (
	latencyEvents = 500
	sharedRounds  = 4
	quietRounds   = 2
)

// stealTicks are the machine's CPU time so far, in ticks: all of it, and what the hypervisor took from its virtual
// CPUs for other guests (steal).
type stealTicks struct{ total, steal int64 }

// cpuSteal reads the machine's stealTicks from /proc/stat.
func cpuSteal() (stealTicks, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return stealTicks{}, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return stealTicks{}, fmt.Errorf("/proc/stat: no steal time in %q", line)
	}
	var t stealTicks
	for i, f := range fields[1:] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return stealTicks{}, fmt.Errorf("/proc/stat: %q: %w", line, err)
		}
		if i < 8 { // guest time is counted in user time already
			t.total += n
		}
		if i == 7 {
			t.steal = n
		}
	}
	return t, nil
}

// arrivalBook keeps the proxies' arrivals (fetch takes the ones noted since it last did) until the stream whose
// events they are sets its holds.
type arrivalBook struct {
	mu    sync.Mutex
	fetch func() (map[int64]arrival, error)
	at    map[int64]arrival
}

func newArrivalBook(fetch func() (map[int64]arrival, error)) *arrivalBook {
	return &arrivalBook{fetch: fetch, at: map[int64]arrival{}}
}

// holds sets t's holds (trips.holds).
func (a *arrivalBook) holds(t *trips) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	more, err := a.fetch()
	if err != nil {
		return err
	}
	maps.Copy(a.at, more)
	if err := t.holds(a.at); err != nil {
		return err
	}
	for _, id := range t.ids {
		delete(a.at, id)
	}
	return nil
}

// p99Ratio is a node's p99 together over its p99 alone, and the two.
type p99Ratio struct {
	ratio           float64
	alone, together time.Duration
}

func (r p99Ratio) max(o p99Ratio) p99Ratio {
	if o.ratio > r.ratio {
		return o
	}
	return r
}

// p99Ratios are the worst node's p99Ratio of each of trips' measures.
type p99Ratios struct{ hold, work, socket, read p99Ratio }

func (r p99Ratios) max(o p99Ratios) p99Ratios {
	return p99Ratios{hold: r.hold.max(o.hold), work: r.work.max(o.work), socket: r.socket.max(o.socket), read: r.read.max(o.read)}
}

// worstP99Ratio streams every node alone and then every node together, rounds times, after one round of each that
// opens and keeps every connection (agent to proxy, proxy to stand-in): what is compared is streaming, not TLS
// handshakes. The nodes' streams alone run at the same time when aloneAtOnce (each through a proxy of its own),
// else one after the other. It returns the worst node's ratio of its p99 together to its p99 alone, of each of
// trips' measures.
func worstP99Ratio(b *testing.B, nodes, rounds int, alone, together func(n int) (trips, error), aloneAtOnce bool) p99Ratios {
	round := func(stream func(n int) (trips, error)) []trips {
		lat := make([]trips, nodes)
		errs := make([]error, nodes)
		var wg sync.WaitGroup
		for n := range nodes {
			wg.Go(func() { lat[n], errs[n] = stream(n) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			b.Fatal(err)
		}
		return lat
	}
	round(together)
	if aloneAtOnce {
		round(alone)
	}
	alones, togethers := make([]trips, nodes), make([]trips, nodes)
	keep := func(into *trips, t trips) {
		into.work = append(into.work, t.work...)
		into.hold = append(into.hold, t.hold...)
		into.socket = append(into.socket, t.socket...)
		into.read = append(into.read, t.read...)
	}
	oneByOne := func(stream func(n int) (trips, error)) []trips {
		lat := make([]trips, nodes)
		for n := range nodes {
			t, err := stream(n)
			if err != nil {
				b.Fatal(err)
			}
			lat[n] = t
		}
		return lat
	}
	aloneRound := oneByOne
	if aloneAtOnce {
		aloneRound = round
	}
	for range rounds {
		for n, t := range aloneRound(alone) {
			keep(&alones[n], t)
		}
		for n, t := range round(together) {
			keep(&togethers[n], t)
		}
	}
	ratio := func(alone, together []time.Duration) p99Ratio {
		a, t := percentile(alone, 99), percentile(together, 99)
		return p99Ratio{ratio: float64(t) / float64(a), alone: a, together: t}
	}
	var worst p99Ratios
	for n := range nodes {
		worst = worst.max(p99Ratios{
			hold:   ratio(alones[n].hold, togethers[n].hold),
			work:   ratio(alones[n].work, togethers[n].work),
			socket: ratio(alones[n].socket, togethers[n].socket),
			read:   ratio(alones[n].read, togethers[n].read),
		})
	}
	return worst
}

// timeToFirstByte makes one request (with the fix node's placeholder when key is set) and returns the time to the
// first byte of its answer, then drains it.
func timeToFirstByte(tb testing.TB, c *http.Client, method, target string, key bool) time.Duration {
	tb.Helper()
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader(`{"model":"claude-sonnet-4-5"}`)
	}
	req, _ := http.NewRequest(method, target, body)
	if key {
		req.Header.Set("x-api-key", phFixKey)
	}
	start := time.Now()
	res, err := c.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	one := make([]byte, 1)
	if _, err := io.ReadFull(res.Body, one); err != nil {
		tb.Fatal(err)
	}
	d := time.Since(start)
	_, _ = io.Copy(io.Discard, res.Body)
	return d
}

func medianDuration(x []time.Duration) time.Duration {
	s := append([]time.Duration(nil), x...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// modelLatency is how long the stand-in takes to its first byte in BenchmarkBrokerTimeToFirstByteModel: a small
// fraction of a real model API's time to first token (hundreds of milliseconds), so the ratio errs against the
// proxy.
const modelLatency = 5 * time.Millisecond

// BenchmarkBrokerTimeToFirstByteModel is the time to the first byte of an answer through the broker against a
// direct TLS request to the same stand-in, which starts answering modelLatency after a request arrives, as a model
// API does (median of 200; goal: ttfb-ratio at most 1.10). overhead-µs is the median difference itself, the figure
// that does not depend on the stand-in; BenchmarkBrokerTimeToFirstByte measures against a stand-in that answers at
// once, where the proxy's hop is a large part of the whole.
func BenchmarkBrokerTimeToFirstByteModel(b *testing.B) {
	const samples = 200
	ca := newTestCA(b)
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(modelLatency) // the model thinking
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"type":"message","usage":{"input_tokens":1,"output_tokens":1}}`)
	}))
	up.TLS = &tls.Config{Certificates: []tls.Certificate{ca.leaf}}
	up.StartTLS()
	b.Cleanup(up.Close)
	port := up.Listener.Addr().(*net.TCPAddr).Port
	ep := fmt.Sprintf("api.anthropic.com:%d", port)
	proxy := benchProxy(b, &Config{UpstreamCAPEM: ca.pem, Nodes: []NodeConfig{{Name: "fix", Secret: secretFix,
		Broker: &BrokerConfig{API: BrokerAPIAnthropic, Paths: anthropicTestPaths, Endpoints: []string{ep}, Price: sonnetPrice,
			Credentials: []BrokerCredential{{Name: "ANTHROPIC_API_KEY", Placeholder: phFixKey, Value: realFixKey, Header: "x-api-key"}}}}}})
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(ca.pem))
	direct := &http.Client{Transport: &http.Transport{Proxy: nil, ForceAttemptHTTP2: true,
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "api.anthropic.com"}}}
	brokered := &http.Client{Transport: &http.Transport{Proxy: nil}}
	ttfb := func(c *http.Client, target string, key bool) time.Duration {
		return timeToFirstByte(b, c, http.MethodPost, target, key)
	}
	directURL := fmt.Sprintf("https://127.0.0.1:%d/v1/messages", port)
	brokerURL := "http://" + proxy + brokerPrefix("fix", secretFix) + ep + "/v1/messages"
	ttfb(direct, directURL, false) // warm both connections
	ttfb(brokered, brokerURL, true)
	var ds, bs []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := 0; j < samples; j++ {
			ds = append(ds, ttfb(direct, directURL, false))
			bs = append(bs, ttfb(brokered, brokerURL, true))
		}
	}
	b.StopTimer()
	md, mb := medianDuration(ds), medianDuration(bs)
	b.ReportMetric(float64(md.Microseconds()), "direct-ttfb-µs")
	b.ReportMetric(float64(mb.Microseconds()), "brokered-ttfb-µs")
	b.ReportMetric(float64((mb - md).Microseconds()), "overhead-µs")
	b.ReportMetric(float64(mb)/float64(md), "ttfb-ratio")
}
