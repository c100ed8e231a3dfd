package egress

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// resolveLog is a test resolver that maps every name to loopback and records each name it was asked for: what
// the proxy was about to dial.
type resolveLog struct {
	mu    sync.Mutex
	names []string
}

func (r *resolveLog) resolve(_ context.Context, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.names = append(r.names, host)
	return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
}

func (r *resolveLog) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.names...)
}

func startRecordingProxy(t *testing.T, allow []string) (string, *syncBuffer, *resolveLog) {
	t.Helper()
	cfg, err := ParseConfig(mustJSON(t, Config{Listen: "127.0.0.1:0", Nodes: []NodeConfig{{Name: "fix", Secret: secretFix, Allow: allow}}}))
	if err != nil {
		t.Fatal(err)
	}
	log, rl := &syncBuffer{}, &resolveLog{}
	s, err := NewServer(cfg, log, Options{Resolve: rl.resolve, AddressAllowed: func(netip.Addr) bool { return true }})
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
		_ = s.Shutdown(ctx)
		<-done
	})
	return l.Addr().String(), log, rl
}

// rawRequest sends a request head exactly as written (the request line and the Host header are the attacker's)
// and returns the status code.
func rawRequest(t *testing.T, proxy, method, target, host string) int {
	t.Helper()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: %s\r\n\r\n", method, target, host, basic("fix", secretFix))
	res, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: method})
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	res.Body.Close()
	return res.StatusCode
}

// TestProxyDialsWhatItJudged: the name and port the proxy judges are the ones it dials. A request target that is
// not a plain host:port authority, a name that normalisation would change into an allowed one (full-width
// letters, a trailing dot), or a port spelt otherwise than in digits, is refused before anything is resolved; a
// valid internationalised name is judged and dialled in its A-label form.
func TestProxyDialsWhatItJudged(t *testing.T) {
	port := echoUpstream(t)
	p := func(host string) string { return fmt.Sprintf("%s:%d", host, port) }
	addr, log, rl := startRecordingProxy(t, []string{p("allowed.test"), p("xn--bcher-kva.test")})
	tests := []struct {
		name, method, target, host string
		allowed                    bool
		dialled                    string // the one name the proxy may resolve; "" for none
	}{
		{"control", "CONNECT", p("allowed.test"), p("allowed.test"), true, "allowed.test"},
		{"upper case is the same name", "CONNECT", p("ALLOWED.test"), p("allowed.test"), true, "allowed.test"},
		{"IDN in its A-label form", "CONNECT", p("bücher.test"), p("xn--bcher-kva.test"), true, "xn--bcher-kva.test"},
		{"path-form target, allowed Host header", "CONNECT", "//" + p("evil.test"), p("allowed.test"), false, ""},
		{"absolute-form CONNECT", "CONNECT", "http://" + p("evil.test") + "/", p("allowed.test"), false, ""},
		{"authority with a path", "CONNECT", p("allowed.test") + "/x", p("allowed.test"), false, ""},
		{"authority with user info", "CONNECT", "evil.test@" + p("allowed.test"), p("allowed.test"), false, ""},
		{"full-width letter", "CONNECT", p("ａllowed.test"), p("allowed.test"), false, ""},
		{"full-width dot", "CONNECT", p("allowed。test"), p("allowed.test"), false, ""},
		{"trailing dot", "CONNECT", p("allowed.test."), p("allowed.test"), false, ""},
		{"signed port", "CONNECT", "allowed.test:+" + fmt.Sprint(port), p("allowed.test"), false, ""},
		{"zero-padded port", "CONNECT", "allowed.test:0" + fmt.Sprint(port), p("allowed.test"), false, ""},
		{"plain HTTP with user info", "GET", "http://evil.test@" + p("allowed.test") + "/", p("allowed.test"), false, ""},
		{"plain HTTP full-width", "GET", "http://" + p("ａllowed.test") + "/", p("allowed.test"), false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(rl.seen())
			code := rawRequest(t, addr, tt.method, tt.target, tt.host)
			dialled := rl.seen()[before:]
			switch {
			case tt.allowed && code != http.StatusOK:
				t.Errorf("%s %s = %d, want 200", tt.method, tt.target, code)
			case !tt.allowed && code/100 != 4:
				t.Errorf("%s %s = %d, want a refusal (4xx)", tt.method, tt.target, code)
			}
			if want := tt.dialled; (want == "" && len(dialled) != 0) || (want != "" && (len(dialled) != 1 || dialled[0] != want)) {
				t.Errorf("%s %s resolved %q, want only %q", tt.method, tt.target, dialled, want)
			}
		})
	}
	for _, d := range log.decisions(t) {
		if d.Allowed && d.Method != "DIAL" && d.Host != "allowed.test" && d.Host != "xn--bcher-kva.test" {
			t.Errorf("decision %+v allowed a name outside the allowlist", d)
		}
	}
}

// TestAddressAllowedEmbeddedIPv4: an IPv6 address that carries a refused IPv4 address (NAT64, IPv4-compatible,
// IPv4-mapped, 6to4, Teredo) is refused like that address.
func TestAddressAllowedEmbeddedIPv4(t *testing.T) {
	for _, tc := range []struct {
		addr           string
		public, withPv bool
	}{
		{"64:ff9b::7f00:1", false, false},             // NAT64 of 127.0.0.1
		{"64:ff9b::a9fe:a9fe", false, false},          // NAT64 of 169.254.169.254
		{"64:ff9b::a00:1", false, true},               // NAT64 of 10.0.0.1
		{"64:ff9b::5db8:d822", true, true},            // NAT64 of a public address
		{"64:ff9b:1::a00:1", false, true},             // local-use NAT64 (RFC 8215)
		{"::127.0.0.1", false, false},                 // IPv4-compatible
		{"::169.254.169.254", false, false},           // IPv4-compatible
		{"::10.0.0.1", false, true},                   // IPv4-compatible
		{"::ffff:127.0.0.1", false, false},            // IPv4-mapped
		{"::ffff:169.254.169.254", false, false},      // IPv4-mapped
		{"::ffff:0:7f00:1", false, false},             // IPv4-translated (RFC 2765)
		{"2002:7f00:1::1", false, false},              // 6to4 of 127.0.0.1
		{"2002:a9fe:a9fe::1", false, false},           // 6to4 of 169.254.169.254
		{"2002:c0a8:101::1", false, true},             // 6to4 of 192.168.1.1
		{"2002:5db8:d822::1", true, true},             // 6to4 of a public address
		{"2001:0:5db8:d822::80ff:fffe", false, false}, // Teredo: client 127.0.0.1 (obfuscated)
		{"fec0::1", false, true},                      // deprecated site-local
	} {
		a := netip.MustParseAddr(tc.addr)
		if got := addressAllowed(a, false); got != tc.public {
			t.Errorf("addressAllowed(%s, false) = %v, want %v", tc.addr, got, tc.public)
		}
		if got := addressAllowed(a, true); got != tc.withPv {
			t.Errorf("addressAllowed(%s, true) = %v, want %v", tc.addr, got, tc.withPv)
		}
	}
	if strings.Contains(fmt.Sprint(addressAllowed(netip.MustParseAddr("2606:2800:220:1::1"), false)), "false") {
		t.Error("a public IPv6 address is refused")
	}
}
