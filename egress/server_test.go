package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// syncBuffer is the decision log of a test: the proxy writes from its handler goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) decisions(t *testing.T) []Decision {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Decision
	sc := bufio.NewScanner(bytes.NewReader(b.buf.Bytes()))
	for sc.Scan() {
		var d Decision
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatalf("decision line %q: %v", sc.Text(), err)
		}
		out = append(out, d)
	}
	return out
}

const (
	secretFix    = "fix-secret-0123456789abcdef0123456789abcdef"
	secretReview = "review-secret-0123456789abcdef0123456789abcdef"
)

// echoUpstream is a TCP server on loopback that echoes what it reads: the stand-in for any upstream.
func echoUpstream(t testing.TB) int {
	return tcpUpstream(t, func(c net.Conn) { _, _ = io.Copy(c, c) })
}

// tcpUpstream is a TCP server on loopback that serves each connection with serve and then closes it; it returns
// its port.
func tcpUpstream(tb testing.TB, serve func(net.Conn)) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); serve(c) }()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// startProxy runs a proxy on loopback whose resolver maps every *.test name (and example.com) to 127.0.0.1.
func startProxy(t *testing.T, nodes []NodeConfig) (addr string, log *syncBuffer) {
	t.Helper()
	return startProxyWith(t, nodes, Options{AddressAllowed: func(netip.Addr) bool { return true }})
}

// startProxyWith is startProxy with the test's own options; the resolver and the clock are startProxy's unless
// opts names its own.
func startProxyWith(t *testing.T, nodes []NodeConfig, opts Options) (addr string, log *syncBuffer) {
	t.Helper()
	_, addr, log = startProxyServer(t, nodes, opts)
	return addr, log
}

// startProxyServer is startProxyWith that also returns the server, for a test that inspects it.
func startProxyServer(t *testing.T, nodes []NodeConfig, opts Options) (s *Server, addr string, log *syncBuffer) {
	t.Helper()
	cfg, err := ParseConfig(mustJSON(t, Config{Listen: "127.0.0.1:0", Nodes: nodes}))
	if err != nil {
		t.Fatal(err)
	}
	log = &syncBuffer{}
	if opts.Resolve == nil {
		opts.Resolve = func(_ context.Context, host string) ([]netip.Addr, error) {
			if strings.HasSuffix(host, ".test") || host == "example.com" {
				return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
			}
			return nil, fmt.Errorf("no such host %s", host)
		}
	}
	if opts.Now == nil {
		opts.Now = func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	}
	s, err = NewServer(cfg, log, opts)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Error(err)
		}
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return s, l.Addr().String(), log
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func basic(node, secret string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(node+":"+secret))
}

// connect sends one CONNECT and returns the status code and, on 200, the open tunnel.
func connect(t *testing.T, proxy, target, auth string) (int, net.Conn) {
	t.Helper()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n", target, target)
	if auth != "" {
		fmt.Fprintf(c, "Proxy-Authorization: %s\r\n", auth)
	}
	fmt.Fprint(c, "\r\n")
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		c.Close()
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	if res.StatusCode != http.StatusOK {
		c.Close()
		return res.StatusCode, nil
	}
	t.Cleanup(func() { c.Close() })
	return res.StatusCode, &bufferedConn{Conn: c, r: br}
}

type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

func TestConnectAllowedBytesFlow(t *testing.T) {
	port := echoUpstream(t)
	addr, log := startProxy(t, []NodeConfig{
		{Name: "fix", Secret: secretFix, Allow: []string{fmt.Sprintf("api.anthropic.test:%d", port)}},
	})
	code, tunnel := connect(t, addr, fmt.Sprintf("api.anthropic.test:%d", port), basic("fix", secretFix))
	if code != http.StatusOK {
		t.Fatalf("CONNECT allowed host = %d, want 200", code)
	}
	if _, err := io.WriteString(tunnel, "ping through the tunnel\n"); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(tunnel).ReadString('\n')
	if err != nil || line != "ping through the tunnel\n" {
		t.Fatalf("echo through the tunnel = %q, %v", line, err)
	}
	want := []Decision{{Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Node: "fix", Method: "CONNECT",
		Host: "api.anthropic.test", Port: port, Allowed: true, Reason: ReasonAllowed}}
	if diff := cmp.Diff(want, log.decisions(t)); diff != "" {
		t.Errorf("decisions mismatch (-want +got):\n%s", diff)
	}
}

func TestConnectTLSUpstream(t *testing.T) {
	up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello from the model API")
	}))
	defer up.Close()
	port := up.Listener.Addr().(*net.TCPAddr).Port
	addr, _ := startProxy(t, []NodeConfig{
		{Name: "fix", Secret: secretFix, Allow: []string{fmt.Sprintf("example.com:%d", port)}},
	})
	tr := up.Client().Transport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: tr.TLSClientConfig.RootCAs, ServerName: "example.com"}
	tr.Proxy = http.ProxyURL(&url.URL{Scheme: "http", User: url.UserPassword("fix", secretFix), Host: addr})
	res, err := (&http.Client{Transport: tr}).Get(fmt.Sprintf("https://example.com:%d/", port))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || string(body) != "hello from the model API" {
		t.Fatalf("GET through the proxy = %s %q", res.Status, body)
	}
}

func TestConnectRefusals(t *testing.T) {
	port := echoUpstream(t)
	p := func(host string) string { return fmt.Sprintf("%s:%d", host, port) }
	addr, log := startProxy(t, []NodeConfig{
		{Name: "fix", Secret: secretFix, Allow: []string{p("api.anthropic.test"), "*.pythonhosted.test"}},
		{Name: "review", Secret: secretReview, Allow: []string{p("pypi.test")}},
	})
	fix := basic("fix", secretFix)
	tests := []struct {
		name, target, auth string
		code               int
		reason             string
	}{
		{"no credentials", p("api.anthropic.test"), "", http.StatusProxyAuthRequired, ReasonNoCredentials},
		{"wrong secret", p("api.anthropic.test"), basic("fix", secretReview), http.StatusProxyAuthRequired, ReasonBadCredentials},
		{"unknown node", p("api.anthropic.test"), basic("ghost", secretFix), http.StatusProxyAuthRequired, ReasonBadCredentials},
		{"not basic", p("api.anthropic.test"), "Bearer " + secretFix, http.StatusProxyAuthRequired, ReasonBadCredentials},
		{"denied host", p("evil.test"), fix, http.StatusForbidden, ReasonHostNotAllowed},
		{"IPv4 literal", p("127.0.0.1"), fix, http.StatusForbidden, ReasonIPLiteral},
		{"IPv6 literal", fmt.Sprintf("[::1]:%d", port), fix, http.StatusForbidden, ReasonIPLiteral},
		{"inet_aton literal", p("2130706433"), fix, http.StatusForbidden, ReasonIPLiteral},
		{"other port", "api.anthropic.test:22", fix, http.StatusForbidden, ReasonPortNotAllowed},
		{"wildcard apex", "pythonhosted.test:443", fix, http.StatusForbidden, ReasonHostNotAllowed},
		{"other node's host", p("pypi.test"), fix, http.StatusForbidden, ReasonOtherNodesHost},
		{"not a host name", "bad_name.test:443", fix, http.StatusForbidden, ReasonInvalidHost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _ := connect(t, addr, tt.target, tt.auth)
			if code != tt.code {
				t.Errorf("CONNECT %s = %d, want %d", tt.target, code, tt.code)
			}
		})
	}
	ds := log.decisions(t)
	if len(ds) != len(tests) {
		t.Fatalf("%d decisions logged, want %d: %+v", len(ds), len(tests), ds)
	}
	for i, d := range ds {
		if d.Allowed || d.Reason != tests[i].reason || d.Time.IsZero() {
			t.Errorf("decision %d (%s) = %+v, want a denial for %q", i, tests[i].name, d, tests[i].reason)
		}
	}
	if ds[4].Node != "fix" || ds[4].Host != "evil.test" || ds[4].Port != port {
		t.Errorf("the denied-host decision does not name node, host and port: %+v", ds[4])
	}
	if strings.Contains(log.buf.String(), secretFix) {
		t.Error("the decision log holds a node secret")
	}
}

func TestPlainHTTPOnlyForExplicitPort(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Proxy-Authorization") != "" {
			http.Error(w, "the proxy forwarded its credentials", http.StatusTeapot)
			return
		}
		_, _ = io.WriteString(w, "plain")
	}))
	defer up.Close()
	port := up.Listener.Addr().(*net.TCPAddr).Port
	addr, log := startProxy(t, []NodeConfig{
		{Name: "fix", Secret: secretFix, Allow: []string{fmt.Sprintf("mirror.test:%d", port), "api.anthropic.test"}},
	})
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http",
		User: url.UserPassword("fix", secretFix), Host: addr})}}
	get := func(u string) int {
		res, err := client.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if code := get(fmt.Sprintf("http://mirror.test:%d/simple/", port)); code != http.StatusOK {
		t.Errorf("plain HTTP to an explicit host:port entry = %d, want 200", code)
	}
	if code := get("http://api.anthropic.test:443/"); code != http.StatusForbidden {
		t.Errorf("plain HTTP to a 443 entry = %d, want 403", code)
	}
	if code := get("http://api.anthropic.test/"); code != http.StatusForbidden {
		t.Errorf("plain HTTP to port 80 of an HTTPS entry = %d, want 403", code)
	}
	ds := log.decisions(t)
	if len(ds) != 3 || !ds[0].Allowed || ds[1].Reason != ReasonPlainHTTP || ds[2].Reason != ReasonPlainHTTP {
		t.Errorf("decisions = %+v", ds)
	}
}

func TestHealthProbe(t *testing.T) {
	addr, _ := startProxy(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := Probe(ctx, addr); err != nil {
		t.Fatalf("Probe() = %v", err)
	}
	if err := ProbeConnect(ctx, addr); err != nil {
		t.Fatalf("ProbeConnect() = %v", err)
	}
	// Something that is not kewplan's proxy fails the probe.
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()
	if err := Probe(ctx, other.Listener.Addr().String()); err == nil {
		t.Error("Probe() of a server that is not the proxy succeeded")
	}
}

// TestResolvedAddressRule runs the production resolver path: an allowed name that resolves to loopback is refused
// after resolution, not reached.
func TestResolvedAddressRule(t *testing.T) {
	cfg, err := ParseConfig([]byte(`{"nodes":[{"name":"fix","secret":"` + secretFix + `","allow":["localhost"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	log := &syncBuffer{}
	s, err := NewServer(cfg, log, Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	code, _ := connect(t, srv.Listener.Addr().String(), "localhost:443", basic("fix", secretFix))
	if code == http.StatusOK {
		t.Fatal("CONNECT to a name resolving to loopback was allowed")
	}
	ds := log.decisions(t)
	if len(ds) != 2 || !ds[0].Allowed || ds[1].Allowed || ds[1].Reason != ReasonRefusedAddress {
		t.Errorf("decisions = %+v, want the allowlist's yes then the address rule's no", ds)
	}
}

func TestAddressAllowed(t *testing.T) {
	for _, tc := range []struct {
		addr           string
		public, withPv bool
	}{
		{"93.184.216.34", true, true},
		{"2606:2800:220:1::1", true, true},
		{"127.0.0.1", false, false},
		{"::1", false, false},
		{"169.254.169.254", false, false},
		{"fe80::1", false, false},
		{"0.0.0.0", false, false},
		{"0.1.2.3", false, false},
		{"224.0.0.1", false, false},
		{"10.1.2.3", false, true},
		{"172.17.0.2", false, true},
		{"192.168.1.1", false, true},
		{"100.64.0.1", false, true},
		{"fd00::1", false, true},
	} {
		a := netip.MustParseAddr(tc.addr)
		if got := addressAllowed(a, false); got != tc.public {
			t.Errorf("addressAllowed(%s, false) = %v, want %v", tc.addr, got, tc.public)
		}
		if got := addressAllowed(a, true); got != tc.withPv {
			t.Errorf("addressAllowed(%s, true) = %v, want %v", tc.addr, got, tc.withPv)
		}
	}
}

func TestParseConfigRefusals(t *testing.T) {
	for name, src := range map[string]string{
		"unknown key":   `{"nodes":[],"allow_everything":true}`,
		"bad name":      `{"nodes":[{"name":"-x","secret":"` + secretFix + `"}]}`,
		"short secret":  `{"nodes":[{"name":"fix","secret":"abc"}]}`,
		"duplicate":     `{"nodes":[{"name":"fix","secret":"` + secretFix + `"},{"name":"fix","secret":"` + secretFix + `"}]}`,
		"bad entry":     `{"nodes":[{"name":"fix","secret":"` + secretFix + `","allow":["10.0.0.0/8"]}]}`,
		"bad listen":    `{"listen":"3128","nodes":[]}`,
		"two documents": `{"nodes":[]} {}`,
	} {
		if _, err := ParseConfig([]byte(src)); err == nil {
			t.Errorf("%s: ParseConfig accepted %s", name, src)
		}
	}
}

func TestProxyURLAndEnv(t *testing.T) {
	u := ProxyURL("172.18.0.2", DefaultPort, "fix", "s3cret")
	if u != "http://fix:s3cret@172.18.0.2:3128" {
		t.Errorf("ProxyURL() = %q", u)
	}
	env := ContainerEnv(u)
	if len(env) != 4 || env["HTTPS_PROXY"] != u || env["http_proxy"] != u {
		t.Errorf("ContainerEnv() = %v", env)
	}
	s1, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := NewSecret()
	if len(s1) != 64 || s1 == s2 {
		t.Errorf("NewSecret() = %q, %q", s1, s2)
	}
}
