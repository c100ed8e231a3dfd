package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// connectFull sends one CONNECT and returns the whole answer (the tunnel closed on 200).
func connectFull(t *testing.T, proxy, target, auth string) *http.Response {
	t.Helper()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n", target, target)
	if auth != "" {
		fmt.Fprintf(c, "Proxy-Authorization: %s\r\n", auth)
	}
	fmt.Fprint(c, "\r\n")
	res, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		res.Body = io.NopCloser(strings.NewReader(string(b)))
	}
	return res
}

// TestRefusalSentences: every refusal answers with one sentence saying what and why, in the body and in
// RefusalHeader, and the decision line carries the same sentence, never a secret.
func TestRefusalSentences(t *testing.T) {
	port := echoUpstream(t)
	p := func(host string) string { return fmt.Sprintf("%s:%d", host, port) }
	addr, log := startProxyWith(t, []NodeConfig{
		{Name: "fix", Secret: secretFix, Allow: []string{"api.anthropic.test", p("github.test")}},
		{Name: "review", Secret: secretReview, Allow: []string{p("pypi.test")}},
	}, Options{AddressAllowed: func(a netip.Addr) bool { return !a.IsLoopback() }})
	fix := basic("fix", secretFix)
	tests := []struct {
		name, target, auth string
		code               int
		want               string
	}{
		{"denied host", "evil.test:443", fix, http.StatusForbidden,
			fmt.Sprintf("evil.test:443 is not in node fix's egress allowlist; the plan allows api.anthropic.test:443, github.test:%d", port)},
		{"other node's host", p("pypi.test"), fix, http.StatusForbidden, "is in another node's egress allowlist"},
		{"no credentials", p("github.test"), "", http.StatusProxyAuthRequired, "carried no proxy credentials"},
		{"wrong secret", p("github.test"), basic("fix", secretReview), http.StatusProxyAuthRequired, "name no node of this run or carry a wrong secret"},
		{"IP literal", p("127.0.0.1"), fix, http.StatusForbidden, "is an IP address"},
		{"refused address", p("github.test"), fix, http.StatusForbidden, "resolves only to addresses the proxy refuses"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := connectFull(t, addr, tt.target, tt.auth)
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode != tt.code {
				t.Errorf("CONNECT %s = %d, want %d", tt.target, res.StatusCode, tt.code)
			}
			h := res.Header.Get(RefusalHeader)
			if !strings.Contains(h, tt.want) || !strings.Contains(string(body), h) {
				t.Errorf("CONNECT %s: header %q, body %q; want both to say %q", tt.target, h, body, tt.want)
			}
		})
	}
	// A plain HTTP forward refused after resolution answers with its sentence too.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(c, "GET http://github.test:%d/ HTTP/1.1\r\nHost: github.test:%d\r\nProxy-Authorization: %s\r\n\r\n", port, port, fix)
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusForbidden || !strings.Contains(res.Header.Get(RefusalHeader), "resolves only to addresses the proxy refuses") ||
		!strings.Contains(string(body), "resolves only to addresses") {
		t.Errorf("plain GET to a refused address = %d %q %q", res.StatusCode, res.Header.Get(RefusalHeader), body)
	}
	for _, d := range log.decisions(t) {
		if d.Allowed {
			continue
		}
		if d.Refusal == "" {
			t.Errorf("decision %+v has no refusal sentence", d)
		}
	}
	if strings.Contains(log.buf.String(), secretFix) || strings.Contains(log.buf.String(), secretReview) {
		t.Error("the decision log holds a node secret")
	}
}

// TestPrivateHostsNamedOnly: a host named in private_hosts may resolve to a private range; another allowed host
// resolving there, and the named host resolving to loopback or metadata, are refused.
func TestPrivateHostsNamedOnly(t *testing.T) {
	port := echoUpstream(t)
	resolve := map[string]string{
		"artifactory.corp": "10.1.2.3", "git.corp": "192.168.7.7", "loop.corp": "127.0.0.1",
		"meta.corp": "fd00:ec2::254", "cgnat.corp": "100.64.1.1", "linklocal.corp": "169.254.169.254",
	}
	var mu sync.Mutex
	var dialled []netip.AddrPort
	addr, log := startProxyWith(t, []NodeConfig{{Name: "fix", Secret: secretFix,
		Allow: []string{
			fmt.Sprintf("artifactory.corp:%d", port), fmt.Sprintf("git.corp:%d", port), fmt.Sprintf("loop.corp:%d", port),
			fmt.Sprintf("meta.corp:%d", port), fmt.Sprintf("cgnat.corp:%d", port), fmt.Sprintf("linklocal.corp:%d", port),
		},
		PrivateHosts: []string{"artifactory.corp", "loop.corp", "meta.corp", "cgnat.corp", "linklocal.corp"}}},
		Options{
			Resolve: func(_ context.Context, host string) ([]netip.Addr, error) {
				if a, ok := resolve[host]; ok {
					return []netip.Addr{netip.MustParseAddr(a)}, nil
				}
				return nil, fmt.Errorf("no such host %s", host)
			},
			Dial: func(ctx context.Context, a netip.AddrPort) (net.Conn, error) {
				mu.Lock()
				dialled = append(dialled, a)
				mu.Unlock()
				return (&net.Dialer{}).DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", port))
			},
		})
	fix := basic("fix", secretFix)
	for host, want := range map[string]int{
		"artifactory.corp": http.StatusOK, "cgnat.corp": http.StatusOK,
		"git.corp": http.StatusForbidden, "loop.corp": http.StatusForbidden, "meta.corp": http.StatusForbidden,
		"linklocal.corp": http.StatusForbidden,
	} {
		res := connectFull(t, addr, fmt.Sprintf("%s:%d", host, port), fix)
		if res.StatusCode != want {
			t.Errorf("CONNECT %s = %d, want %d", host, res.StatusCode, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dialled) != 2 {
		t.Errorf("dialled %v, want only artifactory.corp's and cgnat.corp's addresses", dialled)
	}
	refused := 0
	for _, d := range log.decisions(t) {
		if d.Method == "DIAL" && d.Reason == ReasonRefusedAddress {
			refused++
		}
	}
	if refused != 4 {
		t.Errorf("%d refused-address decisions, want 4: %s", refused, log.buf.String())
	}
}

// waitFor polls cond until it holds, failing after a generous backstop (no sleep stands in for synchronisation).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestFloodDoesNotStarveOtherNode: unauthenticated clients parking many idle connections, and one node holding
// its every tunnel, leave another node's CONNECT working; the node past its bound is refused for load.
func TestFloodDoesNotStarveOtherNode(t *testing.T) {
	port := echoUpstream(t)
	target := fmt.Sprintf("api.anthropic.test:%d", port)
	addr, log := startProxyWith(t, []NodeConfig{
		{Name: "flood", Secret: secretFix, Allow: []string{target}},
		{Name: "work", Secret: secretReview, Allow: []string{target}},
	}, Options{AddressAllowed: func(netip.Addr) bool { return true },
		Limits: Limits{MaxConns: 8, MaxPerNode: 3, HeaderTimeout: time.Minute, IdleTimeout: time.Minute}})

	// 64 parked connections that never send a byte, and 8 that stop halfway through their headers.
	var parked []net.Conn
	for i := 0; i < 72; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if i >= 64 {
			fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: x\r\n", target)
		}
		parked = append(parked, c)
		defer c.Close()
	}
	// The flooding node holds its three tunnels; a fourth is refused for load.
	for i := 0; i < 3; i++ {
		if code, _ := connect(t, addr, target, basic("flood", secretFix)); code != http.StatusOK {
			t.Fatalf("flood tunnel %d = %d, want 200", i+1, code)
		}
	}
	res := connectFull(t, addr, target, basic("flood", secretFix))
	if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(res.Header.Get(RefusalHeader), "for load") {
		t.Errorf("fourth flood tunnel = %d %q, want 503 for load", res.StatusCode, res.Header.Get(RefusalHeader))
	}
	// The other node still gets its tunnel, and it carries bytes.
	code, tunnel := connect(t, addr, target, basic("work", secretReview))
	if code != http.StatusOK {
		t.Fatalf("work's CONNECT under the flood = %d, want 200", code)
	}
	if _, err := io.WriteString(tunnel, "still here\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(tunnel).ReadString('\n'); err != nil || line != "still here\n" {
		t.Fatalf("echo through work's tunnel = %q, %v", line, err)
	}
	load := 0
	for _, d := range log.decisions(t) {
		if d.Reason == ReasonLoad && d.Node == "flood" {
			load++
		}
	}
	if load != 1 {
		t.Errorf("%d load decisions for node flood, want 1", load)
	}
	// Most parked connections were evicted to make room: reading them ends.
	closed := 0
	for _, c := range parked {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err == io.EOF {
			closed++
		}
	}
	if closed < len(parked)-8 {
		t.Errorf("%d of %d parked connections closed, want all but at most 8", closed, len(parked))
	}
}

// TestIdleAndOversize: a silent connection and a silent tunnel are closed after the idle timeout; a request whose
// headers pass the bound is refused.
func TestIdleAndOversize(t *testing.T) {
	port := echoUpstream(t)
	target := fmt.Sprintf("api.anthropic.test:%d", port)
	addr, log := startProxyWith(t, []NodeConfig{{Name: "fix", Secret: secretFix, Allow: []string{target}}},
		Options{AddressAllowed: func(netip.Addr) bool { return true },
			Limits: Limits{IdleTimeout: 100 * time.Millisecond, HeaderTimeout: time.Minute, MaxHeaderBytes: 4 << 10}})

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("read of a silent connection = %v, want EOF once the proxy closes it", err)
	}

	code, tunnel := connect(t, addr, target, basic("fix", secretFix))
	if code != http.StatusOK {
		t.Fatalf("CONNECT = %d", code)
	}
	_ = tunnel.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := tunnel.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("read of a silent tunnel = %v, want EOF once the proxy closes it", err)
	}

	big, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	_ = big.SetDeadline(time.Now().Add(20 * time.Second))
	go fmt.Fprintf(big, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nX-Pad: %s\r\n\r\n", target, target, strings.Repeat("a", 64<<10))
	res, err := http.ReadResponse(bufio.NewReader(big), &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	checkUnreadRefusal(t, res, log, http.StatusRequestHeaderFieldsTooLarge, ReasonHeadersTooLarge,
		"the request was refused unread because its line and headers are larger than the proxy's bound of 4.0 KiB; send smaller headers")
}

// checkUnreadRefusal checks the answer to a request the proxy refused before reading it: the status, the sentence
// in RefusalHeader and as the body, and its decision line (method REQUEST, as it names no node).
func checkUnreadRefusal(t *testing.T, res *http.Response, log *syncBuffer, status int, reason, want string) {
	t.Helper()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != status || res.Header.Get(RefusalHeader) != want || string(body) != "kewplan egress proxy: "+want+"\n" {
		t.Errorf("answer %d %q %q, want %d with the sentence %q", res.StatusCode, res.Header.Get(RefusalHeader), body, status, want)
	}
	if !hasDecision(log.decisions(t), Decision{Method: "REQUEST", Status: status, Reason: reason, Refusal: want}) {
		t.Errorf("no decision line %q %q: %+v", reason, want, log.decisions(t))
	}
}

// TestMalformedRequestRefusal: a request Go's server cannot read is answered with a refusal sentence that carries
// Go's reason, and a decision line; a handler's own 400 answer is passed on as it is.
func TestMalformedRequestRefusal(t *testing.T) {
	addr, log := startProxy(t, []NodeConfig{{Name: "fix", Secret: secretFix, Allow: []string{"api.anthropic.test:443"}}})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nX-No-Host: 1\r\n\r\n") // HTTP/1.1 requires Host
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	checkUnreadRefusal(t, res, log, http.StatusBadRequest, ReasonMalformedRequest,
		"the request was refused because it is not well-formed HTTP/1.1 (Bad Request: missing required Host header); send a request line, a Host header and headers as HTTP/1.1 defines them")
	for _, p := range []string{
		"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n",        // not an error
		"HTTP/1.1 431 Too Large\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n", // a handler's sorted headers
		"HTTP/1.1 400 Bad\r\nRequest\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n",
	} {
		if _, _, ok := serverErrorAnswer([]byte(p)); ok {
			t.Errorf("serverErrorAnswer took %q for Go's own answer", p)
		}
	}
}

// hasDecision reports whether the log holds a decision with want's method, status, reason and refusal.
func hasDecision(ds []Decision, want Decision) bool {
	for _, d := range ds {
		if d.Method == want.Method && d.Status == want.Status && d.Reason == want.Reason && d.Refusal == want.Refusal && !d.Allowed {
			return true
		}
	}
	return false
}

// TestAcceptRefusedForLoad: when every connection is busy in a tunnel, a newcomer is answered 503 for load and the
// refusal is a decision line.
func TestAcceptRefusedForLoad(t *testing.T) {
	port := echoUpstream(t)
	target := fmt.Sprintf("api.anthropic.test:%d", port)
	addr, log := startProxyWith(t, []NodeConfig{{Name: "fix", Secret: secretFix, Allow: []string{target}}},
		Options{AddressAllowed: func(netip.Addr) bool { return true }, Limits: Limits{MaxConns: 2, MaxPerNode: 2}})
	for i := 0; i < 2; i++ {
		if code, _ := connect(t, addr, target, basic("fix", secretFix)); code != http.StatusOK {
			t.Fatalf("tunnel %d = %d", i+1, code)
		}
	}
	res := connectFull(t, addr, target, basic("fix", secretFix))
	if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(res.Header.Get(RefusalHeader), "all nodes together") {
		t.Errorf("third connection = %d %q, want 503 for load", res.StatusCode, res.Header.Get(RefusalHeader))
	}
	waitFor(t, "the load decision", func() bool {
		for _, d := range log.decisions(t) {
			if d.Method == "ACCEPT" && d.Reason == ReasonLoad && d.Refusal != "" {
				return true
			}
		}
		return false
	})
}

// TestConnTrackerFreesEverything: once every client is gone (tunnels, refusals, parked and evicted connections,
// plain HTTP keep-alives), the proxy holds no connection and no node slot: nothing leaks the bounds away.
func TestConnTrackerFreesEverything(t *testing.T) {
	port := echoUpstream(t)
	target := fmt.Sprintf("api.anthropic.test:%d", port)
	s, addr, _ := startProxyServer(t, []NodeConfig{{Name: "fix", Secret: secretFix, Allow: []string{target}}},
		Options{AddressAllowed: func(netip.Addr) bool { return true }, Limits: Limits{MaxConns: 6, MaxPerNode: 3}})
	var clients []net.Conn
	for i := 0; i < 10; i++ { // parked, most of them evicted
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	for i := 0; i < 4; i++ { // three tunnels, the fourth refused for load
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: %s\r\n\r\n", target, target, basic("fix", secretFix))
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		if _, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect}); err != nil {
			t.Fatal(err)
		}
	}
	if res := connectFull(t, addr, "evil.test:443", basic("fix", secretFix)); res.StatusCode != http.StatusForbidden {
		t.Errorf("denied CONNECT = %d", res.StatusCode)
	}
	for _, c := range clients {
		c.Close()
	}
	waitFor(t, "every connection and node slot freed", func() bool {
		s.conns.mu.Lock()
		defer s.conns.mu.Unlock()
		return s.conns.open == 0 && s.conns.evict.Len() == 0 && s.conns.perNode["fix"] == 0
	})
}

// TestIdleWatch: a connection that read or wrote within the period is given the rest of it when the timer fires; one
// quiet for the whole period ends; a stopped watch never ends it.
func TestIdleWatch(t *testing.T) {
	ended := make(chan struct{}, 1)
	c1, c2 := net.Pipe()
	defer c2.Close()
	ic := newIdleConn(c1, time.Hour, func() { ended <- struct{}{} })
	defer ic.stop()
	go func() { _, _ = c2.Read(make([]byte, 1)) }()
	if _, err := ic.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	ic.fire() // the write was just now: not idle
	if len(ended) != 0 {
		t.Fatal("a connection that just wrote was ended as idle")
	}
	ic.last.Store(monotonic() - int64(time.Hour) - 1)
	ic.fire()
	if len(ended) != 1 {
		t.Fatal("a connection quiet for the whole period was not ended")
	}
	<-ended
	ic.stop()
	ic.fire()
	if len(ended) != 0 {
		t.Fatal("a stopped watch ended its connection")
	}
}

// TestSlowHeadersRefusal: a request whose line and headers do not arrive within the header timeout is answered 408
// with its sentence, and a decision line; a keep-alive that sent nothing is closed without a word.
func TestSlowHeadersRefusal(t *testing.T) {
	addr, log := startProxyWith(t, []NodeConfig{{Name: "fix", Secret: secretFix, Allow: []string{"api.anthropic.test:443"}}},
		Options{Limits: Limits{HeaderTimeout: 200 * time.Millisecond, IdleTimeout: 300 * time.Millisecond}})
	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	_ = slow.SetDeadline(time.Now().Add(time.Minute))
	fmt.Fprintf(slow, "CONNECT api.anthropic.test:443 HTTP/1.1\r\nHost: api.anthropic.test:443\r\n") // and nothing more
	res, err := http.ReadResponse(bufio.NewReader(slow), &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	checkUnreadRefusal(t, res, log, http.StatusRequestTimeout, ReasonHeaderTimeout,
		"the request was refused because its line and headers did not arrive within 200ms; send the whole request at once")

	quiet, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer quiet.Close()
	_ = quiet.SetDeadline(time.Now().Add(time.Minute))
	if b, err := io.ReadAll(quiet); err != nil || len(b) != 0 {
		t.Errorf("a connection that sent nothing got %q (%v), want a close without a word", b, err)
	}
	// A request answered, then a quiet keep-alive: closed without a word too.
	kept, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close()
	_ = kept.SetDeadline(time.Now().Add(time.Minute))
	fmt.Fprintf(kept, "GET %s HTTP/1.1\r\nHost: proxy\r\n\r\n", HealthPath)
	br := bufio.NewReader(kept)
	if res, err := http.ReadResponse(br, nil); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("health: %v %v", res, err)
	} else {
		_, _ = io.Copy(io.Discard, res.Body)
	}
	if b, err := io.ReadAll(br); err != nil || len(b) != 0 {
		t.Errorf("a quiet keep-alive got %q (%v), want a close without a word", b, err)
	}
}
