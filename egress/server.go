package egress

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/elazarl/goproxy"
	"golang.org/x/net/idna"

	"github.com/kewplan/kewplan/config"
)

// HealthPath answers 200 "ok" to a direct (non-proxy) GET: apply's probe that the proxy is up (see Probe).
const HealthPath = "/healthz"

// Reasons of a decision, stable for the ledger and `runs show`.
const (
	ReasonAllowed          = "allowed"
	ReasonNoCredentials    = "no proxy credentials"
	ReasonBadCredentials   = "unknown node or wrong secret"
	ReasonIPLiteral        = "IP literal target"
	ReasonInvalidHost      = "not a host name"
	ReasonHostNotAllowed   = "host not allowed for this node"
	ReasonOtherNodesHost   = "host allowed for another node only"
	ReasonPortNotAllowed   = "port not allowed for this host"
	ReasonPlainHTTP        = "plain HTTP not allowed for this host and port"
	ReasonScheme           = "only http:// requests and CONNECT are proxied"
	ReasonRefusedAddress   = "host resolves only to refused addresses (loopback, link-local, private or metadata)"
	ReasonResolveFailed    = "host does not resolve"
	ReasonUpstreamRefused  = "upstream connection failed"
	ReasonMalformedRequest = "malformed proxy request"
	ReasonLoad             = "load"              // the proxy had no room for the connection or the node's request (Limits)
	ReasonHeadersTooLarge  = "headers too large" // a request's line and headers passed Limits.MaxHeaderBytes
	ReasonHeaderTimeout    = "headers too slow"  // a request's line and headers took longer than Limits.HeaderTimeout
)

// Decision is one line of the proxy's log: every request it judged, allowed or denied.
type Decision struct {
	Time    time.Time `json:"time"`
	Node    string    `json:"node"` // "" when the request carried no valid credentials
	Method  string    `json:"method"`
	Host    string    `json:"host"`
	Port    int       `json:"port"`
	Allowed bool      `json:"allowed"`
	Reason  string    `json:"reason"`
	// Refusal is a denial's one sentence, as the agent received it: what was refused and why.
	Refusal string `json:"refusal,omitempty"`
	// Kind is "" for a forward-proxy decision, KindBroker for a brokered request (Host and Port are then the
	// runner endpoint), KindControl for a call on the control endpoint. The fields below are theirs.
	Kind string `json:"kind,omitempty"`
	// Path is the request's path on the proxy (no query: a query string may carry anything).
	Path string `json:"path,omitempty"`
	// Status is the HTTP status the agent (or apply) received.
	Status int `json:"status,omitempty"`
	// Credential is the name (never the value) of the credential a brokered request used.
	Credential string `json:"credential,omitempty"`
	// BytesIn is the request body sent upstream, BytesOut the response body the agent received.
	BytesIn  int64 `json:"bytes_in,omitempty"`
	BytesOut int64 `json:"bytes_out,omitempty"`
	// DurationMS is from the request's arrival to the end of its answer.
	DurationMS int64 `json:"duration_ms,omitempty"`
	// FirstByteMS is a forwarded brokered request's time from its arrival to the first byte of the answer the
	// agent received (the upstream's status line, or the broker's own refusal mid-answer); nil when none went.
	FirstByteMS *int64 `json:"first_byte_ms,omitempty"`
	// Meter is a brokered request's model call and metered usage (broker_budget.go).
	Meter *Meter `json:"meter,omitempty"`
	// Attempt is the node's attempt a brokered request was admitted in (from 1), or the attempt a control call
	// started.
	Attempt int `json:"attempt,omitempty"`
}

// Options are the parts of the proxy a test replaces; the zero value is the production proxy.
type Options struct {
	// Resolve resolves a host name; the system resolver (Go's) when nil.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// AddressAllowed judges a resolved address; nil applies the built-in rule (see Config.AllowPrivateAddresses
	// and NodeConfig.PrivateHosts).
	AddressAllowed func(netip.Addr) bool
	// Dial connects to a judged address; a net.Dialer when nil (a test points every address at its stand-in).
	Dial func(ctx context.Context, addr netip.AddrPort) (net.Conn, error)
	// Limits bound connections, tunnels, timeouts and header sizes; the defaults when zero.
	Limits Limits
	// Now is the clock of the log; time.Now when nil.
	Now func() time.Time
	// DialTimeout bounds one upstream connection; 10s when zero.
	DialTimeout time.Duration
	// Stderr receives the proxy's diagnostics that are no decision (a state file it could not save); os.Stderr
	// when nil.
	Stderr io.Writer
}

// Server is kewplan's egress proxy: an HTTP forward proxy that lets each authenticated node CONNECT only to the
// hosts and ports of its own allowlist, resolves names itself, and logs every decision as one JSON line.
type Server struct {
	cfg   *Config
	opts  Options
	nodes map[string]*nodeAllow
	proxy *goproxy.ProxyHttpServer
	// tunnelShares are each node's tunnel slots (fair.go).
	tunnelShares map[string]*tunnelShare
	broker       *broker

	logMu sync.Mutex
	log   io.Writer

	srvMu sync.Mutex
	srv   *http.Server

	conns *connTracker
}

type nodeAllow struct {
	secret   []byte
	patterns []config.HostPattern
	private  []config.HostPattern // the hosts that may resolve to private ranges (NodeConfig.PrivateHosts)
}

type ctxKey struct{}

// judged is what ServeHTTP allowed, carried in the request's context to the only dialler.
type judged struct {
	node string
	target
}

// NewServer builds a proxy from a checked configuration (ParseConfig); decisions go to decisions, one JSON line
// each.
func NewServer(cfg *Config, decisions io.Writer, opts Options) (*Server, error) {
	if cfg == nil {
		return nil, errors.New("egress proxy: no configuration")
	}
	if decisions == nil {
		decisions = io.Discard
	}
	s := &Server{cfg: cfg, opts: opts, nodes: map[string]*nodeAllow{}, log: decisions}
	if s.opts.Now == nil {
		s.opts.Now = time.Now
	}
	if s.opts.DialTimeout == 0 {
		s.opts.DialTimeout = 10 * time.Second
	}
	if s.opts.Resolve == nil {
		r := &net.Resolver{PreferGo: true}
		s.opts.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return r.LookupNetIP(ctx, "ip", host)
		}
	}
	if s.opts.Dial == nil {
		d := &net.Dialer{}
		s.opts.Dial = func(ctx context.Context, a netip.AddrPort) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", a.String())
		}
	}
	s.opts.Limits = s.opts.Limits.withDefaults()
	s.tunnelShares = map[string]*tunnelShare{}
	for _, n := range cfg.Nodes {
		s.tunnelShares[n.Name] = newTunnelShare(s.opts.Limits.TunnelSlots)
	}
	s.conns = newConnTracker(s.opts.Limits, s.tunnelShares, func(sentence string) {
		s.record(Decision{Method: "ACCEPT", Reason: ReasonLoad, Refusal: sentence})
	}, func(status int, reason, sentence string) {
		// The request was never read, so it names no node, method or target.
		s.record(Decision{Method: "REQUEST", Status: status, Reason: reason, Refusal: sentence})
	})
	for _, n := range cfg.Nodes {
		na := &nodeAllow{secret: []byte(n.Secret)}
		for _, e := range n.Allow {
			p, why := config.ParseHostPattern(e)
			if why != "" {
				return nil, fmt.Errorf("egress proxy: node %q: entry %q: %s", n.Name, e, why)
			}
			na.patterns = append(na.patterns, p)
		}
		for _, e := range n.PrivateHosts {
			p, why := config.ParseHostPattern(e)
			if why != "" {
				return nil, fmt.Errorf("egress proxy: node %q: private host %q: %s", n.Name, e, why)
			}
			na.private = append(na.private, p)
		}
		s.nodes[n.Name] = na
	}

	p := goproxy.NewProxyHttpServer()
	p.Verbose = false
	p.Logger = log.New(io.Discard, "", 0)
	// Never another proxy from the environment, never TLS interception: a tunnel or a plain HTTP forward to the
	// address this server resolved and judged.
	p.Tr = &http.Transport{Proxy: nil, DialContext: s.dialContext, ForceAttemptHTTP2: false,
		TLSHandshakeTimeout: 10 * time.Second, ResponseHeaderTimeout: 60 * time.Second, MaxIdleConns: 16,
		IdleConnTimeout: 90 * time.Second, MaxResponseHeaderBytes: int64(s.opts.Limits.MaxHeaderBytes)}
	p.ConnectDialWithReq = func(req *http.Request, network, addr string) (net.Conn, error) {
		c, err := s.dialContext(req.Context(), network, addr)
		if err != nil {
			return nil, err
		}
		j, _ := req.Context().Value(ctxKey{}).(judged)
		return fairConn{Conn: c, share: s.tunnelShares[j.node]}, nil // a tunnel: its writes take its node's slots (fair.go)
	}
	p.ConnectDial = nil
	// A refused dial answers with its sentence: on a CONNECT goproxy has hijacked the connection and hands it here,
	// on a plain HTTP forward the failed round trip reaches the response filter with no response.
	p.ConnectionErrHandler = func(w io.Writer, ctx *goproxy.ProxyCtx, err error) {
		if r, ok := dialRefusal(err); ok {
			writeRefusal(w, r.status, r.sentence)
			return
		}
		writeRefusal(w, http.StatusBadGateway, exchangeFailed(ctx.Req)) // never goproxy's text of a Go error
	}
	p.OnResponse().DoFunc(func(resp *http.Response, ctx *goproxy.ProxyCtx) *http.Response {
		if resp != nil || ctx.Error == nil {
			return resp
		}
		r, ok := dialRefusal(ctx.Error)
		if !ok {
			// goproxy would answer the Go error's own text; the agent reads a sentence instead.
			r = &refusalError{status: http.StatusBadGateway, sentence: exchangeFailed(ctx.Req)}
		}
		resp = goproxy.NewResponse(ctx.Req, "text/plain; charset=utf-8", r.status, "kewplan egress proxy: "+r.sentence+"\n")
		resp.Header.Set(RefusalHeader, headerSafe(r.sentence))
		return resp
	})
	s.proxy = p
	if err := s.initBroker(); err != nil {
		return nil, err
	}
	s.conns.brokerAPI = s.brokerAPIOfHead
	return s, nil
}

// ServeHTTP judges a request and hands an allowed one to goproxy.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tc, _ := r.Context().Value(connKey{}).(*trackedConn)
	if tc != nil {
		s.conns.begin(tc)
		defer s.conns.end(tc)
	}
	if s.serveOwn(w, r) {
		return
	}
	if r.Method != http.MethodConnect && !r.URL.IsAbs() {
		if r.Method == http.MethodGet && r.URL.Path == HealthPath {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, "ok\n")
			return
		}
		http.Error(w, "kewplan egress proxy: not a proxy request", http.StatusNotFound)
		return
	}
	d := Decision{Method: r.Method}
	tgt, err := s.target(r)
	d.Host, d.Port = tgt.host, tgt.port
	node, ok, reason := s.authenticate(r)
	d.Node = node
	deny := func(status int, reason string) {
		d.Reason = reason
		d.Refusal = s.refusalSentence(node, r.Method, tgt, reason)
		s.record(d)
		if status == http.StatusProxyAuthRequired {
			w.Header().Set("Proxy-Authenticate", `Basic realm="kewplan egress"`)
		}
		refuse(w, status, d.Refusal)
	}
	if !ok {
		deny(http.StatusProxyAuthRequired, reason)
		return
	}
	if err != nil {
		deny(http.StatusForbidden, err.Error())
		return
	}
	if reason := s.judge(node, tgt.host, tgt.port, r.Method == http.MethodConnect); reason != ReasonAllowed {
		deny(http.StatusForbidden, reason)
		return
	}
	if tc != nil && !s.conns.claim(tc, node) {
		d.Reason = ReasonLoad
		d.Refusal = loadSentence("node "+node+"'s requests and tunnels", s.opts.Limits.MaxPerNode)
		s.record(d)
		refuse(w, http.StatusServiceUnavailable, d.Refusal)
		return
	}
	d.Allowed, d.Reason = true, ReasonAllowed
	s.record(d)
	// goproxy dials r.URL.Host (and a forwarded request names r.Host): both become the judged target, and the dial
	// itself takes the target from the context, so no other spelling of the request can be what is dialled.
	r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, judged{node: node, target: tgt}))
	r.URL.Host, r.Host = tgt.hostPort(), tgt.hostPort()
	if r.Method != http.MethodConnect {
		r.Header.Del("Proxy-Authorization") // the node's secret never travels upstream
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = &countingReader{r: r.Body, size: r.ContentLength} // ends at its length (see countingReader)
		}
	}
	s.proxy.ServeHTTP(w, r)
}

// target is the one reading of where a request wants to go: the normalised name and the port that are judged,
// logged and dialled. Nothing else of the request (the Host header, the request URI) is consulted after it.
type target struct {
	host string
	port int
}

func (t target) hostPort() string { return net.JoinHostPort(t.host, strconv.Itoa(t.port)) }

// target reads the host and port a request wants. A CONNECT's request target must be a plain host:port authority
// (RFC 9110 9.3.6); a plain HTTP request's must be an absolute http:// URL without user information. A refused
// target still reports what it can, for the log.
func (s *Server) target(r *http.Request) (target, error) {
	var hostport string
	if r.Method == http.MethodConnect {
		// Go reads "CONNECT //evil:443" as a path and takes the Host header for r.Host, while r.URL says nothing of
		// a host: only the request target itself is read, and only an authority is accepted.
		hostport = r.RequestURI
		if hostport == "" || strings.ContainsAny(hostport, "/?#@\\%") || r.URL.Host != hostport {
			return target{host: clip(hostport)}, errors.New(ReasonMalformedRequest)
		}
	} else {
		if r.URL.Scheme != "http" {
			return target{host: clip(r.URL.Host)}, errors.New(ReasonScheme)
		}
		if r.URL.User != nil || r.URL.Opaque != "" || r.URL.Host == "" || strings.ContainsAny(r.URL.Host, "@\\%") {
			return target{host: clip(r.URL.Host)}, errors.New(ReasonMalformedRequest)
		}
		hostport = r.URL.Host
		if _, _, err := net.SplitHostPort(hostport); err != nil && !strings.HasSuffix(hostport, ":") {
			hostport = net.JoinHostPort(strings.Trim(hostport, "[]"), "80") // no port: HTTP's default
		}
	}
	h, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return target{host: clip(hostport)}, errors.New(ReasonMalformedRequest)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 1 || port > 65535 || p != strconv.Itoa(port) {
		return target{host: clip(h)}, errors.New(ReasonMalformedRequest)
	}
	if _, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil || strings.Contains(h, ":") {
		return target{host: clip(h), port: port}, errors.New(ReasonIPLiteral)
	}
	name, reason := canonicalName(h)
	if reason != "" {
		return target{host: clip(h), port: port}, errors.New(reason)
	}
	return target{host: name, port: port}, nil
}

// canonicalName is the name the proxy judges and dials for a requested host, or why there is none. Only ASCII
// case may differ between the two: a name that normalisation would otherwise change (a trailing dot, full-width
// or other compatibility characters that map onto an allowed name) is refused, and a non-ASCII name is accepted
// only when it is a valid IDNA 2008 name as written (no mapping) and is then judged and dialled as its A-label.
func canonicalName(h string) (string, string) {
	if _, why := config.ParseHostPattern(h); why != "" {
		if strings.Contains(why, "IP address") {
			return "", ReasonIPLiteral
		}
		return "", ReasonInvalidHost
	}
	ascii := h
	for i := 0; i < len(h); i++ {
		if h[i] >= 0x80 {
			a, err := idna.Registration.ToASCII(h)
			if err != nil {
				return "", ReasonInvalidHost
			}
			if u, err := idna.Registration.ToUnicode(a); err != nil || u != h {
				return "", ReasonInvalidHost
			}
			ascii = a
			break
		}
	}
	name, ok := config.NormaliseHost(ascii)
	if !ok || name != strings.ToLower(ascii) {
		return "", ReasonInvalidHost
	}
	return name, ""
}

// clip keeps a refused target readable in the log.
func clip(s string) string {
	if len(s) > 260 {
		return s[:257] + "..."
	}
	return s
}

// authenticate reads Proxy-Authorization: Basic node:secret.
func (s *Server) authenticate(r *http.Request) (node string, ok bool, reason string) {
	h := r.Header.Get("Proxy-Authorization")
	if h == "" {
		return "", false, ReasonNoCredentials
	}
	scheme, b64, found := strings.Cut(h, " ")
	if !found || !strings.EqualFold(scheme, "Basic") {
		return "", false, ReasonBadCredentials
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
	if err != nil {
		return "", false, ReasonBadCredentials
	}
	name, secret, found := strings.Cut(string(raw), ":")
	n, known := s.nodes[name]
	if !found || !known {
		return "", false, ReasonBadCredentials
	}
	if subtle.ConstantTimeCompare(n.secret, []byte(secret)) != 1 {
		return "", false, ReasonBadCredentials
	}
	return name, true, ""
}

// judge applies the node's allowlist to a normalised host and port.
func (s *Server) judge(node, host string, port int, connect bool) string {
	hostMatched := false
	for _, p := range s.nodes[node].patterns {
		if !p.MatchHost(host) {
			continue
		}
		hostMatched = true
		if p.Port != port {
			continue
		}
		if !connect && p.Port == config.DefaultEgressPort {
			continue // a name allowed for HTTPS is not open to plain HTTP
		}
		return ReasonAllowed
	}
	switch {
	case hostMatched && !connect:
		return ReasonPlainHTTP
	case hostMatched:
		return ReasonPortNotAllowed
	}
	for other, n := range s.nodes {
		if other == node {
			continue
		}
		for _, p := range n.patterns {
			if p.MatchHost(host) {
				return ReasonOtherNodesHost
			}
		}
	}
	return ReasonHostNotAllowed
}

// dialContext resolves the host itself and connects to the first address the address rule allows. It is the
// only way out of the proxy: goproxy's CONNECT tunnels and HTTP forwards both dial through it. A refusal is a
// *refusalError carrying the sentence the agent receives.
func (s *Server) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	j, ok := ctx.Value(ctxKey{}).(judged)
	node, host, port := j.node, j.host, j.port
	deny := func(status int, reason string, cause error) (net.Conn, error) {
		sentence := s.refusalSentence(node, "DIAL", target{host: host, port: port}, reason)
		s.record(Decision{Node: node, Method: "DIAL", Host: host, Port: port, Reason: reason, Refusal: sentence})
		if cause != nil {
			return nil, fmt.Errorf("%s: %w (%w)", addr, &refusalError{status: status, sentence: sentence}, cause)
		}
		return nil, fmt.Errorf("%s: %w", addr, &refusalError{status: status, sentence: sentence})
	}
	if !ok || addr != j.hostPort() {
		// Only a judged request dials, and only the target judged (a guard: ServeHTTP makes them agree).
		host = clip(addr)
		return deny(http.StatusForbidden, ReasonMalformedRequest, nil)
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return deny(http.StatusForbidden, ReasonIPLiteral, nil) // never reached through ServeHTTP; a guard for any other caller
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.DialTimeout)
	defer cancel()
	addrs, err := s.opts.Resolve(ctx, host)
	if err != nil || len(addrs) == 0 {
		return deny(http.StatusBadGateway, ReasonResolveFailed, err)
	}
	var lastErr error
	for _, a := range addrs {
		a = a.Unmap()
		if !s.addressAllowed(node, host, a) {
			continue
		}
		c, err := s.opts.Dial(ctx, netip.AddrPortFrom(a, uint16(port)))
		if err == nil {
			return newIdleConn(c, s.opts.Limits.IdleTimeout, nil), nil
		}
		lastErr = err
	}
	if lastErr == nil {
		return deny(http.StatusForbidden, ReasonRefusedAddress, nil)
	}
	return deny(http.StatusBadGateway, ReasonUpstreamRefused, lastErr)
}

// addressAllowed judges one resolved address of a node's host: public addresses always, private ranges (RFC 1918,
// ULA, CGNAT) only for a host the node names in private_hosts (or when the whole proxy allows them), everything
// else (loopback, link-local, metadata, unspecified, multicast) never.
func (s *Server) addressAllowed(node, host string, a netip.Addr) bool {
	if s.opts.AddressAllowed != nil {
		return s.opts.AddressAllowed(a)
	}
	if addressAllowed(a, s.cfg.AllowPrivateAddresses) {
		return true
	}
	if !addressAllowed(a, true) {
		return false
	}
	if n := s.nodes[node]; n != nil {
		for _, p := range n.private {
			if p.MatchHost(host) {
				return true
			}
		}
	}
	return false
}

// addressAllowed is the resolved-address rule: a permitted name whose DNS an attacker controls must not lead to
// the host, its neighbours or the cloud's metadata service (DNS rebinding; sandbox-runtime's resolved-address check).
func addressAllowed(a netip.Addr, private bool) bool {
	a = a.Unmap()
	if metadata[a] {
		return false
	}
	for _, v4 := range embeddedIPv4(a) {
		if !addressAllowed(v4, private) {
			return false
		}
	}
	if localNAT64.Contains(a) || siteLocal.Contains(a) {
		// Translation to an operator-chosen IPv4 space (RFC 8215), and the deprecated site-local range: both
		// private.
		return private
	}
	switch {
	case !a.IsValid(), a.IsUnspecified(), a.IsLoopback(), a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast(),
		a.IsInterfaceLocalMulticast(), a.IsMulticast():
		return false
	case a.Is4() && a.As4()[0] == 0: // 0.0.0.0/8 reaches the host on Linux
		return false
	case a.Is4() && a.As4() == [4]byte{255, 255, 255, 255}:
		return false
	}
	cgnat := netip.MustParsePrefix("100.64.0.0/10")
	if (a.IsPrivate() || cgnat.Contains(a)) && !private {
		return false
	}
	return true
}

// metadata are cloud metadata services on addresses the range rules would call private (AWS's IPv6 endpoint in
// ULA space, Alibaba Cloud's in CGNAT space): refused even for a host named in private_hosts. (AWS's, GCP's and
// Azure's IPv4 169.254.169.254 is link-local, refused by the range rule.)
var metadata = map[netip.Addr]bool{
	netip.MustParseAddr("fd00:ec2::254"):   true,
	netip.MustParseAddr("100.100.100.200"): true,
	netip.MustParseAddr("169.254.169.254"): true,
}

var (
	nat64      = netip.MustParsePrefix("64:ff9b::/96")    // RFC 6052 well-known prefix
	localNAT64 = netip.MustParsePrefix("64:ff9b:1::/48")  // RFC 8215 local-use translation
	compatible = netip.MustParsePrefix("::/96")           // IPv4-compatible (RFC 4291, deprecated)
	translated = netip.MustParsePrefix("::ffff:0:0:0/96") // IPv4-translated (RFC 2765)
	sixToFour  = netip.MustParsePrefix("2002::/16")       // 6to4 (RFC 3056)
	teredo     = netip.MustParsePrefix("2001::/32")       // Teredo (RFC 4380)
	siteLocal  = netip.MustParsePrefix("fec0::/10")       // deprecated site-local (RFC 3879)
)

// embeddedIPv4 are the IPv4 addresses an IPv6 address carries to its destination through a translator or tunnel
// (NAT64, IPv4-compatible and -translated, 6to4, Teredo's server and client): a gateway on the path would deliver
// to them, so they are judged by the IPv4 rule too. (IPv4-mapped addresses are unmapped before this.)
func embeddedIPv4(a netip.Addr) []netip.Addr {
	if !a.Is6() {
		return nil
	}
	b := a.As16()
	v4 := func(p []byte) netip.Addr { return netip.AddrFrom4([4]byte{p[0], p[1], p[2], p[3]}) }
	switch {
	case nat64.Contains(a), translated.Contains(a):
		return []netip.Addr{v4(b[12:16])}
	case compatible.Contains(a):
		return []netip.Addr{v4(b[12:16])}
	case sixToFour.Contains(a):
		return []netip.Addr{v4(b[2:6])}
	case teredo.Contains(a):
		client := [4]byte{^b[12], ^b[13], ^b[14], ^b[15]}
		return []netip.Addr{v4(b[4:8]), netip.AddrFrom4(client)}
	}
	return nil
}

// record writes one decision as a JSON line.
func (s *Server) record(d Decision) {
	d.Time = s.opts.Now().UTC()
	b, err := json.Marshal(d)
	if err != nil {
		return
	}
	s.logMu.Lock()
	defer s.logMu.Unlock()
	_, _ = s.log.Write(append(b, '\n'))
}

// Serve accepts proxy connections on l until Shutdown.
func (s *Server) Serve(l net.Listener) error {
	lim := s.opts.Limits
	// The header timeout bounds a request still arriving, the idle timeout a keep-alive between requests (Go's
	// server has none by default: a parked connection would stay for ever), the header bound its size; the
	// tracking listener bounds the number of connections and their silence.
	srv := &http.Server{Handler: s, ReadHeaderTimeout: lim.HeaderTimeout, IdleTimeout: lim.IdleTimeout,
		MaxHeaderBytes: lim.MaxHeaderBytes, ConnContext: connContext, ConnState: s.conns.connState}
	l = &trackingListener{Listener: l, t: s.conns}
	s.srvMu.Lock()
	s.srv = srv
	s.srvMu.Unlock()
	err := srv.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// ListenAndServe listens on the configuration's address and serves until ctx ends.
func (s *Server) ListenAndServe(ctx context.Context) error {
	l, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("egress proxy: listen %s: %w", s.cfg.Listen, err)
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = s.Shutdown(sctx)
		case <-done:
		}
	}()
	return s.Serve(l)
}

// Shutdown stops accepting and waits for open requests (hijacked tunnels are not waited for).
func (s *Server) Shutdown(ctx context.Context) error {
	s.srvMu.Lock()
	srv := s.srv
	s.srvMu.Unlock()
	if srv == nil {
		return nil
	}
	return srv.Shutdown(ctx)
}

// Probe asks a running proxy at addr ("host:port") whether it is up: GET /healthz, directly, expecting 200 "ok".
// Apply calls it before any agent starts, for kewplan's own proxy; an existing proxy (sandbox egress proxy =
// "http://...") is probed with ProbeConnect instead, since its health endpoint is its own.
func Probe(ctx context.Context, addr string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+HealthPath, nil)
	if err != nil {
		return fmt.Errorf("probe egress proxy %s: %w", addr, err)
	}
	c := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	res, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("probe egress proxy %s: %w", addr, err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 64))
	if res.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "ok" {
		return fmt.Errorf("probe egress proxy %s: answered %s, not kewplan's health reply", addr, res.Status)
	}
	return nil
}

// ProbeConnect checks that a forward proxy at addr answers an HTTP request at all (any status: an existing proxy
// may well refuse kewplan's probe target with 403 or 407). It proves the address is a live HTTP proxy, not that
// it allows a host.
func ProbeConnect(ctx context.Context, addr string) error {
	d := &net.Dialer{}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("probe proxy %s: %w", addr, err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if _, err := io.WriteString(c, "CONNECT kewplan-probe.invalid:443 HTTP/1.1\r\nHost: kewplan-probe.invalid:443\r\n\r\n"); err != nil {
		return fmt.Errorf("probe proxy %s: %w", addr, err)
	}
	buf := make([]byte, 12)
	if _, err := io.ReadFull(c, buf); err != nil {
		return fmt.Errorf("probe proxy %s: no HTTP answer: %w", addr, err)
	}
	if !strings.HasPrefix(string(buf), "HTTP/1.") {
		return fmt.Errorf("probe proxy %s: the answer is not HTTP", addr)
	}
	return nil
}
