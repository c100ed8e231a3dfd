package egress

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var sonnetPrice = &BrokerPrice{Input: 3, Output: 15, CacheRead: 0.30, CacheWrite: 3.75}

// meterAnswers are provider answers with the usage the meter must read from them.
var meterAnswers = []struct {
	name  string
	sse   bool
	body  string
	price *BrokerPrice
	want  BrokerUsage
}{
	{
		name: "anthropic JSON",
		body: `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929",` +
			`"content":[{"type":"text","text":"usage: {\"input_tokens\": 9} \\\" model"},{"type":"tool_use","id":"t","name":"x","input":{"usage":{"input_tokens":999999}}}],` +
			`"stop_reason":"end_turn","usage":{"input_tokens":1200,"cache_creation_input_tokens":300,"cache_read_input_tokens":5000,"output_tokens":480,"service_tier":"standard"}}`,
		price: sonnetPrice,
		want: BrokerUsage{Model: "claude-sonnet-4-5-20250929", InputTokens: 1200, OutputTokens: 480, CacheReadTokens: 5000,
			CacheWriteTokens: 300, CostUSD: (1200*3 + 480*15 + 5000*0.30 + 300*3.75) / 1e6, CostSource: "estimated", Reported: true},
	},
	{
		name: "anthropic SSE",
		sse:  true,
		body: "event: message_start\r\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_2\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"usage\":{\"input_tokens\":2500,\"cache_read_input_tokens\":100,\"output_tokens\":1}}}\r\n\r\n" +
			"event: ping\ndata: {\"type\": \"ping\"}\n\n" +
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"data: {\\\"usage\\\":{\\\"output_tokens\\\":7}}\"}}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":12}}\n\n" +
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{},\"usage\":{\"output_tokens\":42}}\n\n" +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
		want: BrokerUsage{Model: "claude-sonnet-4-5", InputTokens: 2500, OutputTokens: 42, CacheReadTokens: 100, CostSource: "unknown", Reported: true},
	},
	{
		name: "openrouter JSON with its cost",
		body: `{"id":"gen-1","model":"anthropic/claude-sonnet-4.5","choices":[{"message":{"role":"assistant","content":"hi"}}],` +
			`"usage":{"prompt_tokens":1000,"completion_tokens":200,"total_tokens":1200,"cost":0.0123,"prompt_tokens_details":{"cached_tokens":400}}}`,
		price: sonnetPrice,
		want: BrokerUsage{Model: "anthropic/claude-sonnet-4.5", InputTokens: 600, OutputTokens: 200, CacheReadTokens: 400,
			CostUSD: 0.0123, CostSource: "reported", Reported: true},
	},
	{
		name: "openai SSE chunks, usage in the last",
		sse:  true,
		body: "data: {\"id\":\"c\",\"model\":\"gpt-5\",\"choices\":[{\"delta\":{\"content\":\"He\"}}],\"usage\":null}\n\n" +
			"data: {\"id\":\"c\",\"model\":\"gpt-5\",\"choices\":[{\"delta\":{\"content\":\"llo\"}}],\"usage\":null}\n\n" +
			"data: {\"id\":\"c\",\"model\":\"gpt-5\",\"choices\":[],\"usage\":{\"prompt_tokens\":50,\"completion_tokens\":7,\"prompt_tokens_details\":{\"cached_tokens\":0}}}\n\n" +
			"data: [DONE]\n\n",
		want: BrokerUsage{Model: "gpt-5", InputTokens: 50, OutputTokens: 7, CostSource: "unknown", Reported: true},
	},
	{
		name: "an error answer has no usage",
		body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
		want: BrokerUsage{CostSource: "unknown"},
	},
	{
		name: "a bare number and garbage",
		body: "12345 } ] \"usage\": {\"input_tokens\": 4} ::: ,,, {{{{",
		want: BrokerUsage{CostSource: "unknown"},
	},
}

// meterOf feeds body to a fresh meter in the pieces split gives and returns its result.
func meterOf(sse bool, price *BrokerPrice, pieces [][]byte) BrokerUsage {
	m := newUsageMeter(sse)
	for _, p := range pieces {
		if n, err := m.Write(p); n != len(p) || err != nil {
			panic(fmt.Sprintf("Write(%d bytes) = %d, %v", len(p), n, err))
		}
	}
	return m.result(price)
}

func TestUsageMeterWhole(t *testing.T) {
	for _, tc := range meterAnswers {
		t.Run(tc.name, func(t *testing.T) {
			got := meterOf(tc.sse, tc.price, [][]byte{[]byte(tc.body)})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("meter mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestUsageMeterChunkBoundaries feeds every answer byte by byte, and cut in two at every position: a chunk
// boundary anywhere (inside a key, an escape, the "data:" prefix, a number) changes nothing.
func TestUsageMeterChunkBoundaries(t *testing.T) {
	for _, tc := range meterAnswers {
		t.Run(tc.name, func(t *testing.T) {
			var bytewise [][]byte
			for i := range len(tc.body) {
				bytewise = append(bytewise, []byte{tc.body[i]})
			}
			if diff := cmp.Diff(tc.want, meterOf(tc.sse, tc.price, bytewise)); diff != "" {
				t.Errorf("byte by byte: meter mismatch (-want +got):\n%s", diff)
			}
			for cut := 0; cut <= len(tc.body); cut++ {
				got := meterOf(tc.sse, tc.price, [][]byte{[]byte(tc.body[:cut]), []byte(tc.body[cut:])})
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Fatalf("cut at %d: meter mismatch (-want +got):\n%s", cut, diff)
				}
			}
		})
	}
}

// TestUsageMeterOversize: a 16 MiB text before the usage is scanned through without being kept; a usage object
// bigger than the bound is dropped whole; an endless SSE line keeps nothing either.
func TestUsageMeterOversize(t *testing.T) {
	big := strings.Repeat("x", 16<<20)
	m := newUsageMeter(false)
	_, _ = m.Write([]byte(`{"model":"claude-opus-4-5","content":[{"type":"text","text":"` + big + `"}],`))
	_, _ = m.Write([]byte(`"usage":{"input_tokens":10,"output_tokens":20}}`))
	if got := m.result(nil); got.InputTokens != 10 || got.OutputTokens != 20 || got.Model != "claude-opus-4-5" {
		t.Errorf("usage after a 16 MiB text: %+v", got)
	}
	if c := cap(m.scan.value) + cap(m.scan.key); c > 2*maxPickedValue {
		t.Errorf("the meter kept %d bytes", c)
	}

	m = newUsageMeter(false)
	_, _ = m.Write([]byte(`{"usage":{"input_tokens":10,"padding":"` + strings.Repeat("p", 2*maxPickedValue) + `"}}`))
	if got := m.result(nil); got.Reported || got.InputTokens != 0 {
		t.Errorf("an oversize usage object was read: %+v", got)
	}
	if c := cap(m.scan.value); c > 2*maxPickedValue {
		t.Errorf("the meter kept %d bytes of an oversize value", c)
	}

	m = newUsageMeter(true)
	_, _ = m.Write([]byte("data: {\"usage\":\"" + big))
	_, _ = m.Write([]byte("\"}\ndata: {\"usage\":{\"output_tokens\":3}}\n"))
	if got := m.result(nil); got.OutputTokens != 3 {
		t.Errorf("usage after an endless line: %+v", got)
	}
}

// TestUsageMeterGarbage: random bytes, and real answers with random bytes flipped, never panic, and a usage read
// from garbage is only ever what encoding/json accepts.
func TestUsageMeterGarbage(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for i := range 2000 {
		var body []byte
		if i%2 == 0 {
			body = make([]byte, r.Intn(600))
			r.Read(body)
		} else {
			body = []byte(meterAnswers[r.Intn(len(meterAnswers))].body)
			for k := 0; k < 1+r.Intn(8); k++ {
				const noise = "{}[]\":,\\\n x0"
				body[r.Intn(len(body))] = noise[r.Intn(len(noise))]
			}
		}
		var pieces [][]byte
		for rest := body; len(rest) > 0; {
			n := 1 + r.Intn(len(rest))
			pieces, rest = append(pieces, rest[:n]), rest[n:]
		}
		got := meterOf(i%4 < 2, sonnetPrice, pieces)
		if got.InputTokens < 0 || got.OutputTokens < 0 || got.CostUSD < 0 {
			t.Fatalf("negative figures from %q: %+v", body, got)
		}
	}
}

// BenchmarkBrokerMeteringCPU streams a 10 MiB answer (Anthropic server-sent events, 64 bytes of text per delta)
// through a proxy with the broker's meter and through another with the meter off, and compares the CPU time of
// the two proxy processes (startProxyProc: each proxy is a process of its own, as in production, so the stand-in
// and the agents, which share the test process, are not in the figure): metering-ratio is metered / unmetered
// over meteringPairs answers each (goal: at most 1.05). The stand-in sends the answer as a provider streams it,
// each event written and flushed on its own, as fast as the proxies take them: nothing paces them, so a proxy's
// CPU is spent on the events and not on waiting for the next one. meter-ms/10MiB is the meter alone on the same
// bytes, in the test process.
func BenchmarkBrokerMeteringCPU(b *testing.B) {
	body := bigStream()
	metered, unmetered, cuts := meteringPairsCPU(b, body, true)
	start := cpuTime()
	for i := 0; i < b.N; i++ {
		m := newUsageMeter(true)
		for off := 0; off < len(body); off += 32 << 10 {
			_, _ = m.Write(body[off:min(off+32<<10, len(body))])
		}
		if m.result(nil).OutputTokens != 99 {
			b.Fatal("the meter missed the usage")
		}
	}
	alone := cpuTime() - start
	b.ReportMetric(float64(metered)/float64(unmetered), "metering-ratio")
	b.ReportMetric(float64(alone.Microseconds())/1e3/float64(b.N), "meter-ms/10MiB")
	b.ReportMetric(float64(cuts), "cut-answers")
	reportPairCPU(b, metered, unmetered)
}

// BenchmarkBrokerMeteringCPUBulk is BenchmarkBrokerMeteringCPU with the answer sent in unflushed 16 KiB pieces,
// as no provider streams: the proxy's own work per byte is then at its least, and the meter's share of it at its
// greatest. bulk-metering-ratio has no goal; it bounds what the meter can cost.
func BenchmarkBrokerMeteringCPUBulk(b *testing.B) {
	metered, unmetered, cuts := meteringPairsCPU(b, bigStream(), false)
	b.ReportMetric(float64(metered)/float64(unmetered), "bulk-metering-ratio")
	b.ReportMetric(float64(cuts), "cut-answers")
	reportPairCPU(b, metered, unmetered)
}

// reportPairCPU reports each proxy's CPU time for one answer.
func reportPairCPU(b *testing.B, metered, unmetered time.Duration) {
	answers := float64(b.N * meteringPairs)
	b.ReportMetric(float64(metered.Microseconds())/1e3/answers, "metered-cpu-ms")
	b.ReportMetric(float64(unmetered.Microseconds())/1e3/answers, "unmetered-cpu-ms")
}

// meteringPairs is how many answers each proxy streams in one op of the metering benchmarks. One streamed
// answer's proxy CPU varies by several percent from one answer to the next with what else the machine is doing
// (how often the proxy finds its upstream socket empty and its agent asleep decides its system calls and
// wake-ups), more than the meter costs; the ratio is of sums over this many, about 20 s for streamed answers.
const meteringPairs = 16

// meteringBothEnv, set to 1, makes the metering benchmarks meter on both sides: the ratio is then the method's
// own noise on this machine, what a metering-ratio cannot tell from 1.
const meteringBothEnv = "KEWPLAN_TEST_METER_BOTH"

// meteringPairsCPU serves body from a TLS stand-in (each event flushed on its own when perEvent, else in
// unflushed 16 KiB pieces) and fetches it b.N × meteringPairs times through two proxy processes at once, one
// metering and one not. The stand-in answers the two requests of a pair together, writing each piece to one and
// then to the other (first to each in turn), so both proxies receive the same bytes at the same instants. The
// two processes take turns at metering, and at sending their request first: two identical proxies compared with
// fixed roles differed by a few percent on this machine (the process started first cost more), as much as the
// meter. It returns the CPU time of the metering and of the other proxy over their answers, and how many pairs
// arrived cut: such a pair (there should be none) is fetched again and its CPU time is not counted.
func meteringPairsCPU(b *testing.B, body []byte, perEvent bool) (metered, unmetered time.Duration, cuts int) {
	var pieces [][]byte
	for rest := body; len(rest) > 0; {
		n := min(16<<10, len(rest))
		if perEvent {
			n = bytes.Index(rest, []byte("\n\n")) + 2
		}
		pieces, rest = append(pieces, rest[:n]), rest[n:]
	}
	type answer struct {
		w    http.ResponseWriter
		done chan struct{}
	}
	waiting := make(chan answer)
	ca := newTestCA(b)
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		me := answer{w: w, done: make(chan struct{})}
		select {
		case waiting <- me: // the other request's handler writes both answers
			<-me.done
		case other := <-waiting:
			defer close(other.done)
			both := [2]http.ResponseWriter{w, other.w}
			for i, p := range pieces {
				for k := range 2 {
					to := both[(i+k)%2]
					_, _ = to.Write(p)
					if perEvent {
						to.(http.Flusher).Flush()
					}
				}
			}
		case <-r.Context().Done(): // the pair's other request failed
		}
	}))
	up.TLS = &tls.Config{Certificates: []tls.Certificate{ca.leaf}}
	up.StartTLS()
	b.Cleanup(up.Close)
	ep := fmt.Sprintf("api.anthropic.com:%d", up.Listener.Addr().(*net.TCPAddr).Port)
	name := map[bool]string{true: "metering", false: "metering-bulk"}[perEvent]
	var procs [2]*proxyProc
	for i := range procs {
		cfg := &Config{UpstreamCAPEM: ca.pem, Nodes: []NodeConfig{brokeredNode("fix", secretFix, ep, phFixKey)}}
		procs[i] = startProxyProc(b, fmt.Sprintf("%s-%d", name, i), cfg, i == 1)
	}
	both := os.Getenv(meteringBothEnv) == "1"
	client := &http.Client{Transport: &http.Transport{Proxy: nil}}
	fetch := func(ctx context.Context, p *proxyProc) (int64, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+p.addr+brokerPrefix("fix", secretFix)+ep+"/v1/messages", strings.NewReader(`{"stream":true}`))
		req.Header.Set("x-api-key", phFixKey)
		res, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		defer res.Body.Close()
		return io.Copy(io.Discard, res.Body)
	}
	var meteredAnswers [2]int // each process's, for checkMetered
	// pair fetches the answer through both proxies at once, procs[m] metering and procs[first]'s request sent
	// first (so that the stand-in's handler that writes both answers is the other's), and returns the CPU time
	// of the metering proxy and of the other.
	pair := func(m, first int) (time.Duration, time.Duration) {
		for i, p := range procs {
			p.setMeter(b, both || i == m)
		}
		order := [2]*proxyProc{procs[first], procs[1-first]}
		for try := 0; ; try++ {
			ctx, cancel := context.WithCancel(context.Background())
			var n [2]int64
			var errs [2]error
			var cpu [2]time.Duration
			for i, p := range procs {
				cpu[i] = -p.cpu(b)
			}
			var wg sync.WaitGroup
			for i, p := range order {
				wg.Go(func() {
					if n[i], errs[i] = fetch(ctx, p); n[i] != int64(len(body)) {
						cancel() // release the other request from the stand-in
					}
				})
			}
			wg.Wait()
			cancel()
			if n[0] == int64(len(body)) && n[1] == int64(len(body)) {
				for i, p := range procs {
					cpu[i] += p.cpu(b)
					if both || i == m {
						meteredAnswers[i]++
					}
				}
				return cpu[m], cpu[1-m]
			}
			if cuts++; try == 5 {
				b.Fatalf("got %d and %d bytes of %d: %v", n[0], n[1], len(body), errors.Join(errs[:]...))
			}
		}
	}
	pair(0, 0)                                   // open and warm both proxies' connections
	b.SetBytes(int64(meteringPairs * len(body))) // through each proxy
	b.ResetTimer()
	for i := 0; i < b.N*meteringPairs; i++ {
		m, u := pair(i%2, i/2%2)
		metered += m
		unmetered += u
	}
	b.StopTimer()
	if cuts == 0 {
		for i, p := range procs {
			checkMetered(b, p, meteredAnswers[i])
		}
	}
	return metered, unmetered, cuts
}

// checkMetered fails the benchmark unless the proxy's decision lines carry the usage of exactly as many answers
// as it was asked to meter: the two sides compared are what they are named.
func checkMetered(b *testing.B, p *proxyProc, want int) {
	got := 0
	for _, d := range p.decisions(b) {
		if d.Meter != nil && d.Meter.Usage != nil && d.Meter.Usage.OutputTokens == 99 {
			got++
		}
	}
	if got != want {
		b.Fatalf("the proxy metered %d answers, want %d", got, want)
	}
}

// bigStream is a 10 MiB Anthropic event stream whose last usage says 99 output tokens.
func bigStream() []byte {
	var answer bytes.Buffer
	answer.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n")
	text := strings.Repeat("lorem ipsum \\\"quoted\\\" ", 3)[:64]
	for answer.Len() < 10<<20 {
		fmt.Fprintf(&answer, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"%s\"}}\n\n", text)
	}
	answer.WriteString("event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":99}}\n\n")
	return answer.Bytes()
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// FuzzUsageMeter: any answer, cut anywhere, gives the meter's result for the whole answer (for lines shorter
// than maxSSELine), never a panic and never a negative figure.
func FuzzUsageMeter(f *testing.F) {
	for _, a := range meterAnswers {
		f.Add([]byte(a.body), uint16(len(a.body)/2), a.sse)
	}
	f.Fuzz(func(t *testing.T, body []byte, cut uint16, sse bool) {
		if len(body) > maxSSELine {
			return
		}
		c := int(cut) % (len(body) + 1)
		whole := meterOf(sse, sonnetPrice, [][]byte{body})
		split := meterOf(sse, sonnetPrice, [][]byte{body[:c], body[c:]})
		if diff := cmp.Diff(whole, split); diff != "" {
			t.Errorf("cut at %d changed the result (-whole +split):\n%s", c, diff)
		}
		if whole.InputTokens < 0 || whole.OutputTokens < 0 || whole.CacheReadTokens < 0 || whole.CacheWriteTokens < 0 || whole.CostUSD < 0 {
			t.Errorf("negative figures: %+v", whole)
		}
	})
}

// TestUsageMeterSkipsContentEvents: the content events a long answer is made of are passed over, in LF and CRLF
// streams and without the space after "event:", and the usage after them is still read.
func TestUsageMeterSkipsContentEvents(t *testing.T) {
	for name, nl := range map[string]string{"lf": "\n", "crlf": "\r\n"} {
		for _, sep := range []string{"event: ", "event:"} {
			var b strings.Builder
			b.WriteString(sep + "message_start" + nl + `data: {"type":"message_start","message":{"model":"claude-sonnet-4-5","usage":{"input_tokens":7,"output_tokens":1}}}` + nl + nl)
			for i := 0; i < 50; i++ {
				b.WriteString(sep + "content_block_delta" + nl + `data: {"type":"content_block_delta","delta":{"text":"\"usage\": {\"output_tokens\": 999999}"}}` + nl + nl)
			}
			b.WriteString(sep + "message_delta" + nl + `data: {"type":"message_delta","usage":{"output_tokens":42}}` + nl + nl)
			m := newUsageMeter(true)
			_, _ = m.Write([]byte(b.String()))
			if u := m.result(nil); u.InputTokens != 7 || u.OutputTokens != 42 || u.Model != "claude-sonnet-4-5" {
				t.Errorf("%s %q: %+v, want 7 in, 42 out", name, sep, u)
			}
		}
	}
}
