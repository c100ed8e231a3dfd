package egress

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The proxy's own endpoints besides HealthPath, on the same listener. They are told apart from forward-proxy
// requests by their form (a path, not an absolute URL or a CONNECT authority), so one port and one address serve
// everything: agents have no DNS, and the IP address in their proxy URL is also their broker's.
const (
	// BrokerPathPrefix starts a brokered request: /broker/<node>/<identity>/<endpoint>/<the API's own path>, where
	// identity is the node's BrokerIdentity. The node and the endpoint are in the path rather than in the Host
	// header because agents reach the proxy by IP address.
	BrokerPathPrefix = "/broker/"
	// ControlEndNodePath is where apply tells the proxy a node ended: POST /control/nodes/<node>/end with
	// "Authorization: Bearer <control secret>" answers 204, and from then on the node's placeholders are refused
	// and its open brokered requests are cut (see EndNode). POST /control/nodes/<node>/attempts/<n>, with the
	// same secret, says the node's attempt n starts: the proxy's sums and caps start again from zero (see
	// StartAttempt).
	ControlEndNodePath = "/control/nodes/"
	// ControlSecretHeader carries the control secret where an Authorization header cannot reach the proxy: a
	// Kubernetes API server consumes the Authorization of a request it authenticated, so apply calls the
	// control endpoint through the API server's service proxy with the secret in this header instead.
	ControlSecretHeader = "X-Kewplan-Control-Secret"
)

// Kinds of a decision line. Forward-proxy decisions have no kind, as before.
const (
	KindBroker  = "broker"
	KindControl = "control"
)

// Reasons of broker and control decisions, stable for the ledger.
const (
	ReasonBrokered           = "brokered"
	ReasonNoPlaceholder      = "no placeholder credential"
	ReasonWrongPlaceholder   = "unknown placeholder"
	ReasonOtherNodesCred     = "another node's placeholder"
	ReasonMixedPlaceholders  = "placeholders of two credentials"
	ReasonNotBrokeredNode    = "node not brokered"
	ReasonNodeEnded          = "node ended"
	ReasonEndpointNotAllowed = "endpoint not brokered for this node"
	ReasonHostMismatch       = "Host names another endpoint"
	ReasonBadBrokerPath      = "malformed broker path"
	ReasonUpstreamFailed     = "upstream failed"
	ReasonEndedMidRequest    = "node ended during the request"
	ReasonNodeEndedByControl = "node ended by apply"
	ReasonAttemptByControl   = "attempt started by apply"
	ReasonControlAuth        = "wrong or missing control secret"
	ReasonControlUnknown     = "unknown node"
	ReasonControlDisabled    = "control endpoint disabled"
	ReasonStateNotSaved      = "broker state not saved"
)

// strippedHeaders are removed from every brokered request, whatever the runner declares: a credential of the
// agent's own (a placeholder, or a key it found) never travels upstream beside the real one.
var strippedHeaders = []string{"X-Api-Key", "Authorization", "Proxy-Authorization", "Cookie", "Cookie2",
	"Api-Key", "X-Goog-Api-Key"}

// brokerNode is a node's broker state.
type brokerNode struct {
	name        string
	api         string
	endpoints   []brokerEndpoint
	credentials []BrokerCredential
	strip       []string
	endsAt      *time.Time
	price       *BrokerPrice
	budget      *BrokerBudget
	// providerFetch are the provider-fetch features the node's requests may use (BrokerConfig.ProviderFetch).
	providerFetch []string
	paths         []BrokerPath
	maxOutput     int64
	identity      string // BrokerIdentity of the node's proxy secret
	// total is the node's sums across its attempts, bounded by each cap × the plan's attempts.
	total nodeMeter
	// meter is the current attempt's sums; StartAttempt replaces it, and a request sums into the meter it was
	// admitted under, so that a late answer of an earlier attempt never counts against the next.
	meter   atomic.Pointer[nodeMeter]
	ended   context.Context // done once the node ended (EndNode)
	end     context.CancelFunc
	endOnce sync.Once
}

// broker is the Server's credential broker.
type broker struct {
	nodes     map[string]*brokerNode
	control   []byte
	proxy     *httputil.ReverseProxy
	transport *http.Transport
	// unmetered turns reservation and settlement off: the baseline of the metering benchmarks only.
	unmetered atomic.Bool
	// state is the state file (nil: none); restored says the proxy went on from one (state.go).
	state    *stateFile
	restored bool
}

type brokerCtxKey struct{}

// brokered is what ServeHTTP decided for one brokered request, carried to Rewrite and ErrorHandler.
type brokered struct {
	node     *brokerNode
	endpoint brokerEndpoint
	cred     BrokerCredential
	path     string // the API's own path, escaped
	status   int    // set by the error handler
	// modelCall is set for a POST (counted against max_turns); meter reads the answer's usage (meterResponse)
	// into sums, the attempt's meter the request was admitted under.
	modelCall bool
	meter     *usageMeter
	sums      *nodeMeter
	// reserved is a model call's reservation, settled when it ends (reserve.go); upstreamStatus and body are the
	// answer's, cancel ends the upstream exchange (the bound of the reading on after the agent went away).
	reserved       *Reserved
	upstreamStatus int
	body           *meteredBody
	cancel         func()
}

// initBroker builds the broker from the configuration: one TLS transport whose roots are the system's plus
// UpstreamCAPEM, dialling through the proxy's own resolver and address rule.
func (s *Server) initBroker() error {
	b := &broker{nodes: map[string]*brokerNode{}, control: []byte(s.cfg.ControlSecret)}
	for _, n := range s.cfg.Nodes {
		if n.Broker == nil {
			continue
		}
		bn := &brokerNode{name: n.Name, api: n.Broker.API, credentials: n.Broker.Credentials,
			strip: n.Broker.StripHeaders, endsAt: n.Broker.EndsAt, price: n.Broker.Price, budget: n.Broker.Budget,
			paths: n.Broker.Paths, maxOutput: n.Broker.MaxOutputTokens, identity: BrokerIdentity(n.Name, n.Secret),
			providerFetch: n.Broker.ProviderFetch}
		for _, e := range n.Broker.Endpoints {
			ep, why := parseBrokerEndpoint(e)
			if why != "" {
				return fmt.Errorf("egress proxy: node %q: broker endpoint %q: %s", n.Name, e, why)
			}
			bn.endpoints = append(bn.endpoints, ep)
		}
		bn.ended, bn.end = context.WithCancel(context.Background())
		bn.meter.Store(&nodeMeter{attempt: 1})
		b.nodes[n.Name] = bn
	}
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	if s.cfg.UpstreamCAPEM != "" {
		cas, err := upstreamCAs(s.cfg.UpstreamCAPEM)
		if err != nil {
			return fmt.Errorf("egress proxy: %w", err)
		}
		for _, c := range cas {
			roots.AddCert(c)
		}
	}
	b.transport = &http.Transport{
		Proxy:               nil,
		DialContext:         s.dialContext, // the judged endpoint only, resolved and address-checked
		TLSClientConfig:     &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:   true,
		DisableCompression:  true, // answers come as identity, so the meter reads them as they pass
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConns:        32,
		MaxIdleConnsPerHost: 32, // every node's calls go to one or two provider hosts: keep their connections warm
		IdleConnTimeout:     90 * time.Second,
	}
	b.proxy = &httputil.ReverseProxy{
		Rewrite:        s.rewriteBrokered,
		ModifyResponse: s.meterResponse,
		Transport:      b.transport,
		FlushInterval:  -1, // every write reaches the agent at once: server-sent events are never held back
		ErrorHandler:   s.brokerUpstreamError,
		ErrorLog:       log.New(io.Discard, "", 0), // the decision line says what failed
	}
	s.broker = b
	if s.cfg.StateFile != "" {
		b.state = &stateFile{path: s.cfg.StateFile}
		if b.restored, err = s.loadState(); err != nil {
			return err
		}
		// A state file that cannot be written fails the start, not every model call after it.
		if err := s.saveState(); err != nil {
			return err
		}
	}
	return nil
}

// EndNode ends a node for the broker: its placeholders are refused from now on and its open brokered requests
// are cut. It reports whether the node is brokered. Ending twice is harmless.
func (s *Server) EndNode(node string) bool {
	bn, ok := s.broker.nodes[node]
	if !ok {
		return false
	}
	bn.endOnce.Do(bn.end)
	s.stateSaved()
	return true
}

// StartAttempt says a brokered node's attempt n (from 1) starts: the proxy's sums for the attempt start again
// from zero, so that its caps judge each attempt, as apply's budget does, and its decision lines carry n; the
// node's sums across attempts go on (each cap × the plan's attempts bounds them). It reports whether the node
// is brokered and n is its current attempt (then nothing changes) or a later one within the plan's attempts. Requests of the earlier attempt still open keep summing
// into that attempt.
func (s *Server) StartAttempt(node string, n int) bool {
	bn, ok := s.broker.nodes[node]
	if !ok {
		return false
	}
	if bn.budget != nil && bn.budget.Attempts > 0 && int64(n) > bn.budget.Attempts {
		return false
	}
	for {
		cur := bn.meter.Load()
		if n == cur.attempt {
			return true // told twice (a control call retried): the attempt's sums go on
		}
		if n < cur.attempt {
			return false
		}
		if bn.meter.CompareAndSwap(cur, &nodeMeter{attempt: n}) {
			s.stateSaved()
			return true
		}
	}
}

// serveOwn serves the broker and control endpoints; false when r is for neither (a forward-proxy request, the
// health probe, or something else the caller answers). A request in absolute form that names the proxy's own
// address (an agent whose HTTP client sends even its base-URL requests through HTTP_PROXY) is the same request.
func (s *Server) serveOwn(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodConnect {
		return false
	}
	if r.URL.IsAbs() {
		if !addressedToSelf(r) && !s.namedSelf(r) {
			return false
		}
		r.Header.Del("Proxy-Authorization")
	}
	path := r.URL.EscapedPath()
	switch {
	case strings.HasPrefix(path, BrokerPathPrefix):
		s.serveBroker(w, r, strings.TrimPrefix(path, BrokerPathPrefix))
		return true
	case strings.HasPrefix(path, ControlEndNodePath):
		s.serveControl(w, r, strings.TrimPrefix(path, ControlEndNodePath))
		return true
	}
	return false
}

// namedSelf reports whether an absolute-form request's URL names one of the configuration's SelfAddresses (IP
// literals, like addressedToSelf's).
func (s *Server) namedSelf(r *http.Request) bool {
	if r.URL.Scheme != "http" || r.URL.User != nil {
		return false
	}
	host := r.URL.Host
	if _, _, err := net.SplitHostPort(host); err != nil {
		host = net.JoinHostPort(strings.Trim(host, "[]"), "80")
	}
	got, err := netip.ParseAddrPort(host)
	if err != nil {
		return false
	}
	for _, a := range s.cfg.SelfAddresses {
		if want, err := netip.ParseAddrPort(a); err == nil && want.Addr().Unmap() == got.Addr().Unmap() && want.Port() == got.Port() {
			return true
		}
	}
	return false
}

// addressedToSelf reports whether an absolute-form request's URL names the very address and port the request
// arrived on. Only an IP literal can: the forward proxy refuses IP literals, so nothing it would forward is taken.
func addressedToSelf(r *http.Request) bool {
	if r.URL.Scheme != "http" || r.URL.User != nil {
		return false
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	la, err := netip.ParseAddrPort(local.String())
	if err != nil {
		return false
	}
	h, p, err := net.SplitHostPort(r.URL.Host)
	if err != nil {
		h, p = r.URL.Host, "80"
	}
	a, err := netip.ParseAddr(strings.Trim(h, "[]"))
	return err == nil && a.Unmap() == la.Addr().Unmap() && p == strconv.Itoa(int(la.Port()))
}

// serveBroker judges one brokered request (rest is the path after BrokerPathPrefix) and forwards it.
func (s *Server) serveBroker(w http.ResponseWriter, r *http.Request, rest string) {
	start := s.opts.Now()
	d := Decision{Kind: KindBroker, Method: r.Method, Path: clip(r.URL.EscapedPath())}
	nodeName, afterNode, _ := strings.Cut(rest, "/")
	d.Node = clip(nodeName)
	bn := s.broker.nodes[nodeName]
	api := requestAPI(r)
	if bn != nil {
		api = bn.api
	}
	refuse := func(status int, reason, sentence string) {
		d.Reason, d.Status, d.Refusal = reason, status, sentence
		n, _ := writeAPIError(w, api, status, sentence)
		d.BytesOut = int64(n)
		d.DurationMS = s.opts.Now().Sub(start).Milliseconds()
		s.record(d)
	}
	if bn == nil {
		refuse(http.StatusForbidden, ReasonNotBrokeredNode, fmt.Sprintf(
			"kewplan's credential broker refused this request because %q is not a node whose credentials it brokers.", clip(nodeName)))
		return
	}
	cred, reason := s.placeholderOf(bn, r)
	if reason != "" {
		status, sentence := http.StatusUnauthorized, ""
		switch reason {
		case ReasonNoPlaceholder:
			sentence = fmt.Sprintf("kewplan's credential broker refused this request to node %q because it carries no placeholder credential (x-api-key or Authorization: Bearer).", bn.name)
		case ReasonWrongPlaceholder:
			sentence = fmt.Sprintf("kewplan's credential broker refused this request to node %q because its credential is not one of that node's placeholders.", bn.name)
		case ReasonOtherNodesCred:
			status = http.StatusForbidden
			sentence = fmt.Sprintf("kewplan's credential broker refused this request because its placeholder belongs to another node, not to %q.", bn.name)
		case ReasonMixedPlaceholders:
			status = http.StatusBadRequest
			sentence = fmt.Sprintf("kewplan's credential broker refused this request to node %q because it carries the placeholders of two different credentials.", bn.name)
		}
		refuse(status, reason, sentence)
		return
	}
	d.Credential = cred.Name
	identity, afterIdentity, _ := strings.Cut(afterNode, "/")
	if reason := s.identityOf(bn, identity); reason != "" {
		sentence := fmt.Sprintf("kewplan's credential broker refused this request to node %q because its base URL does not carry that node's proxy identity; use the base URL apply gave the node.", bn.name)
		if reason == ReasonOtherNodesIdentity {
			sentence = fmt.Sprintf("kewplan's credential broker refused this request because its base URL carries another node's proxy identity, not %q's: a placeholder is usable only from its own node.", bn.name)
		}
		refuse(http.StatusForbidden, reason, sentence)
		return
	}
	afterNode = afterIdentity
	if ended, when := s.nodeEnded(bn); ended {
		refuse(http.StatusForbidden, ReasonNodeEnded, fmt.Sprintf(
			"kewplan's credential broker refused this request because node %q ended%s and its placeholders are no longer accepted.", bn.name, when))
		return
	}
	ep, apiPath, reason := s.brokerTarget(bn, r, afterNode)
	d.Host, d.Port = ep.host, ep.port
	if reason != "" {
		sentence := map[string]string{
			ReasonBadBrokerPath: fmt.Sprintf("kewplan's credential broker refused this request because its path is not %s%s/<endpoint>/<API path> without dot segments.", BrokerPathPrefix, bn.name),
			ReasonEndpointNotAllowed: fmt.Sprintf("kewplan's credential broker refused this request because %q is not an endpoint node %q may reach through the broker.",
				clip(strings.SplitN(afterNode, "/", 2)[0]), bn.name),
			ReasonHostMismatch: fmt.Sprintf("kewplan's credential broker refused this request because its Host header %q names an endpoint other than %s.", clip(r.Host), ep.host),
		}[reason]
		refuse(http.StatusForbidden, reason, sentence)
		return
	}
	// The betas a request names may make the provider fetch on the agent's behalf (provider_fetch.go); its body
	// is judged once read, in admitBrokered.
	if f := judgeBetas(bn, r.Header); f != nil {
		refuse(f.status, f.reason, f.sentence)
		return
	}
	br := &brokered{node: bn, endpoint: ep, cred: cred, path: apiPath, sums: bn.meter.Load()}
	d.Attempt = br.sums.attempt
	if status, reason, sentence := s.admitBrokered(r, br, &d); reason != "" {
		refuse(status, reason, sentence)
		return
	}
	if br.reserved != nil {
		// The reservation is on disk before the call goes out: a proxy that dies while the provider answers
		// leaves it counted for the next one (state.go).
		if err := s.saveState(); err != nil {
			unreserve(br.sums, &bn.total, *br.reserved)
			fmt.Fprintln(s.opts.stderr(), err)
			refuse(http.StatusServiceUnavailable, ReasonStateNotSaved, fmt.Sprintf(
				"kewplan's credential broker refused this model call to node %s because it could not record the call's reservation, which keeps the node's budget across a restart of the proxy; try again.", bn.name))
			return
		}
	}
	s.forwardBrokered(w, r, &d, start, br)
}

// forwardBrokered streams the request to the endpoint and records its decision line once the answer has ended.
func (s *Server) forwardBrokered(w http.ResponseWriter, r *http.Request, d *Decision, start time.Time, br *brokered) {
	// The upstream exchange outlives the agent's connection (reserve.go: the answer is read on for its usage);
	// the node's end, its EndsAt and the reading on's own bound end it.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	br.cancel = cancel
	stop := context.AfterFunc(br.node.ended, cancel)
	defer stop()
	if br.node.endsAt != nil {
		var cancelDeadline context.CancelFunc
		// Measured on the proxy's clock, like the check that admitted the request.
		ctx, cancelDeadline = context.WithTimeout(ctx, br.node.endsAt.Sub(s.opts.Now()))
		defer cancelDeadline()
	}
	// The dial takes its target from this value only (dialContext), like a forward-proxy tunnel.
	ctx = context.WithValue(ctx, ctxKey{}, judged{node: br.node.name, target: target{host: br.endpoint.host, port: br.endpoint.port}})
	ctx = context.WithValue(ctx, brokerCtxKey{}, br)
	in := &countingReader{r: r.Body, size: r.ContentLength}
	r = r.WithContext(ctx)
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = in
	}
	cw := &countingWriter{ResponseWriter: w, now: s.opts.Now}
	// A stream cut after its headers (the node ended, the agent or the upstream went away) makes ReverseProxy
	// abort the handler with a panic; the decision line is written on the way out either way.
	defer s.recordBrokered(ctx, d, start, br, in, cw)
	s.broker.proxy.ServeHTTP(cw, r)
}

// recordBrokered writes the decision line of a forwarded request: allowed and "brokered" unless the upstream
// failed or the node ended while it was open.
func (s *Server) recordBrokered(ctx context.Context, d *Decision, start time.Time, br *brokered, in *countingReader, cw *countingWriter) {
	aborted := recover()
	d.Allowed, d.Reason = true, ReasonBrokered
	d.Status = cw.status
	if d.Status == 0 {
		d.Status = http.StatusOK
	}
	ended, _ := s.nodeEnded(br.node)
	switch {
	case ended && (br.status != 0 || aborted != nil || ctx.Err() != nil):
		d.Allowed, d.Reason = false, ReasonEndedMidRequest
	case br.status != 0:
		d.Allowed, d.Reason = false, ReasonUpstreamFailed
	}
	if aborted != nil && d.Allowed {
		d.Allowed, d.Reason = false, ReasonUpstreamFailed
	}
	d.BytesIn, d.BytesOut = in.n.Load(), cw.n
	d.DurationMS = s.opts.Now().Sub(start).Milliseconds()
	if !cw.first.IsZero() {
		ms := cw.first.Sub(start).Milliseconds()
		d.FirstByteMS = &ms
	}
	d.Meter = br.meterRecord()
	s.stateSaved()
	s.record(*d)
	if aborted != nil {
		panic(aborted)
	}
}

// placeholderOf finds the credential whose placeholder the request presents, from x-api-key, Authorization
// (Bearer or bare) or the credential's own header. Every presented value is compared, in constant time, with
// every placeholder of every node, so a refusal can say whose it was without the comparison telling by timing.
func (s *Server) placeholderOf(bn *brokerNode, r *http.Request) (BrokerCredential, string) {
	var presented []string
	add := func(v string) {
		if v = strings.TrimSpace(v); v != "" {
			presented = append(presented, v)
		}
	}
	for _, v := range r.Header.Values("X-Api-Key") {
		add(v)
	}
	for _, v := range r.Header.Values("Authorization") {
		if scheme, token, ok := strings.Cut(strings.TrimSpace(v), " "); ok && strings.EqualFold(scheme, "Bearer") {
			add(token)
		} else {
			add(v)
		}
	}
	for _, c := range bn.credentials {
		if k := http.CanonicalHeaderKey(c.Header); k != "X-Api-Key" && k != "Authorization" {
			for _, v := range r.Header.Values(k) {
				if c.Scheme != "" {
					v = strings.TrimPrefix(v, c.Scheme+" ")
				}
				add(v)
			}
		}
	}
	if len(presented) == 0 {
		return BrokerCredential{}, ReasonNoPlaceholder
	}
	var found *BrokerCredential
	for _, p := range presented {
		own, other := false, false
		var match BrokerCredential
		for _, n := range s.broker.nodes {
			for _, c := range n.credentials {
				if subtle.ConstantTimeCompare([]byte(p), []byte(c.Placeholder)) == 1 {
					if n == bn {
						own, match = true, c
					} else {
						other = true
					}
				}
			}
		}
		switch {
		case other:
			return BrokerCredential{}, ReasonOtherNodesCred
		case !own:
			return BrokerCredential{}, ReasonWrongPlaceholder
		case found != nil && found.Name != match.Name:
			return BrokerCredential{}, ReasonMixedPlaceholders
		}
		found = &match
	}
	return *found, ""
}

// nodeEnded reports whether the node ended (by EndNode, or its EndsAt passed) and, for the refusal, when.
func (s *Server) nodeEnded(bn *brokerNode) (bool, string) {
	if bn.ended.Err() != nil {
		return true, ""
	}
	if bn.endsAt != nil && !s.opts.Now().Before(*bn.endsAt) {
		return true, " at " + bn.endsAt.UTC().Format(time.RFC3339)
	}
	return false, ""
}

// brokerTarget reads the endpoint and the API path after the node's segment, and checks them and the Host
// header: the endpoint must be one of the node's, the path must have no dot segments (it is the endpoint's own
// path; nothing may climb out of the broker's prefix into another), and a Host that is a name must be the
// endpoint's (a Host naming another API is a request meant for somewhere else). An IP-literal Host is the
// proxy's own address, as the base URL names it.
func (s *Server) brokerTarget(bn *brokerNode, r *http.Request, afterNode string) (brokerEndpoint, string, string) {
	epText, apiPath, _ := strings.Cut(afterNode, "/")
	apiPath = "/" + apiPath
	if epText == "" {
		return brokerEndpoint{}, "", ReasonBadBrokerPath
	}
	ep, why := parseBrokerEndpoint(epText)
	if why != "" {
		return brokerEndpoint{host: clip(epText)}, "", ReasonEndpointNotAllowed
	}
	allowed := false
	for _, e := range bn.endpoints {
		if e == ep {
			allowed = true
		}
	}
	if !allowed {
		return ep, "", ReasonEndpointNotAllowed
	}
	decoded, err := url.PathUnescape(apiPath)
	if err != nil {
		return ep, "", ReasonBadBrokerPath
	}
	for _, seg := range strings.Split(decoded, "/") {
		if seg == "." || seg == ".." || strings.Contains(seg, "\\") {
			return ep, "", ReasonBadBrokerPath
		}
	}
	if h := r.Host; h != "" {
		hostOnly := h
		if hh, _, err := net.SplitHostPort(h); err == nil {
			hostOnly = hh
		}
		if _, err := netip.ParseAddr(strings.Trim(hostOnly, "[]")); err != nil && !strings.EqualFold(hostOnly, ep.host) {
			return ep, "", ReasonHostMismatch
		}
	}
	return ep, apiPath, ""
}

// rewriteBrokered makes the outgoing request: the endpoint's URL and Host, the API path and query, no
// credential header of the agent's, and the real credential of the one the agent's placeholder stands for.
// (ReverseProxy has already removed hop-by-hop and X-Forwarded-* headers; Rewrite adds none.)
func (s *Server) rewriteBrokered(pr *httputil.ProxyRequest) {
	br := pr.In.Context().Value(brokerCtxKey{}).(*brokered)
	out := pr.Out
	host := br.endpoint.host
	if br.endpoint.port != 443 {
		host = br.endpoint.hostPort()
	}
	path, _ := url.PathUnescape(br.path)
	out.URL = &url.URL{Scheme: "https", Host: host, Path: path, RawPath: br.path, RawQuery: pr.In.URL.RawQuery}
	if out.URL.EscapedPath() != br.path {
		out.URL.RawPath = ""
	}
	out.Host = host
	for _, h := range strippedHeaders {
		out.Header.Del(h)
	}
	out.Header.Del("Accept-Encoding") // identity, for the meter
	for _, h := range br.node.strip {
		out.Header.Del(h)
	}
	for _, c := range br.node.credentials {
		out.Header.Del(c.Header)
	}
	v := br.cred.Value
	if br.cred.Scheme != "" {
		v = br.cred.Scheme + " " + v
	}
	out.Header.Set(br.cred.Header, v)
}

// brokerUpstreamError answers a failed upstream exchange in the API's shape (502), or records that the node
// ended while its request was open.
func (s *Server) brokerUpstreamError(w http.ResponseWriter, r *http.Request, err error) {
	br := r.Context().Value(brokerCtxKey{}).(*brokered)
	br.status = http.StatusBadGateway
	sentence := fmt.Sprintf("kewplan's credential broker could not complete this request to %s because the upstream exchange failed.", br.endpoint.host)
	if ended, _ := s.nodeEnded(br.node); ended {
		br.status = http.StatusForbidden
		sentence = fmt.Sprintf("kewplan's credential broker cut this request because node %q ended.", br.node.name)
	}
	_, _ = writeAPIError(w, br.node.api, br.status, sentence)
}

// requestAPI guesses the protocol of a request to an unknown node, for the shape of its refusal.
func requestAPI(r *http.Request) string {
	if r.Header.Get("Anthropic-Version") != "" || r.Header.Get("X-Api-Key") != "" {
		return BrokerAPIAnthropic
	}
	return BrokerAPIOpenAI
}

// writeAPIError writes a refusal in the endpoint's own error shape, so that the agent's SDK reports the sentence.
func writeAPIError(w http.ResponseWriter, api string, status int, sentence string) (int, error) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Kewplan-Broker", "refused")
	w.WriteHeader(status)
	return w.Write(apiErrorBody(api, status, sentence))
}

// serveControl serves POST /control/nodes/<node>/end and POST /control/nodes/<node>/attempts/<n>.
func (s *Server) serveControl(w http.ResponseWriter, r *http.Request, rest string) {
	d := Decision{Kind: KindControl, Method: r.Method, Path: clip(r.URL.EscapedPath())}
	answer := func(status int, reason string) {
		d.Status, d.Reason = status, reason
		s.record(d)
		if status == http.StatusNoContent {
			w.WriteHeader(status)
			return
		}
		http.Error(w, "kewplan egress proxy: "+reason, status)
	}
	node, ok := strings.CutSuffix(rest, "/end")
	attempt := 0
	if n, num, found := strings.Cut(rest, "/attempts/"); !ok && found {
		v, err := strconv.Atoi(num)
		node, ok, attempt = n, err == nil && v >= 1 && v <= 1<<20, v
	}
	if len(s.broker.control) == 0 {
		answer(http.StatusNotFound, ReasonControlDisabled)
		return
	}
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		token = ""
	}
	if v := r.Header.Get(ControlSecretHeader); token == "" && v != "" {
		token = v
	}
	if token == "" || subtle.ConstantTimeCompare([]byte(token), s.broker.control) != 1 {
		answer(http.StatusUnauthorized, ReasonControlAuth)
		return
	}
	d.Node = clip(node)
	if !ok || strings.Contains(node, "/") {
		answer(http.StatusNotFound, ReasonBadBrokerPath)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		answer(http.StatusMethodNotAllowed, "only POST ends a node or starts an attempt")
		return
	}
	if attempt > 0 {
		if !s.StartAttempt(node, attempt) {
			answer(http.StatusNotFound, ReasonControlUnknown)
			return
		}
		d.Allowed, d.Attempt = true, attempt
		answer(http.StatusNoContent, ReasonAttemptByControl)
		return
	}
	if !s.EndNode(node) {
		answer(http.StatusNotFound, ReasonControlUnknown)
		return
	}
	d.Allowed = true
	answer(http.StatusNoContent, ReasonNodeEndedByControl)
}

// EndNodeAt tells the proxy at addr ("host:port") that node ended: apply calls it when a brokered node's
// container has exited (or was killed), so that a placeholder that leaked out of the container is worthless.
func EndNodeAt(ctx context.Context, addr, controlSecret, node string) error {
	return control(ctx, addr, controlSecret, url.PathEscape(node)+"/end", "end node "+node)
}

// StartAttemptAt tells the proxy at addr that node's attempt n starts (see StartAttempt): apply calls it before
// the container of a retry starts.
func StartAttemptAt(ctx context.Context, addr, controlSecret, node string, n int) error {
	return control(ctx, addr, controlSecret, url.PathEscape(node)+"/attempts/"+strconv.Itoa(n), fmt.Sprintf("start attempt %d of node %s", n, node))
}

// control makes one call on the proxy's control endpoint; what names the call in its error.
func control(ctx context.Context, addr, controlSecret, path, what string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+ControlEndNodePath+path, nil)
	if err != nil {
		return fmt.Errorf("%s at the egress proxy: %w", what, err)
	}
	req.Header.Set("Authorization", "Bearer "+controlSecret)
	c := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	res, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("%s at the egress proxy: %w", what, err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 256))
	if res.StatusCode != http.StatusNoContent {
		return fmt.Errorf("%s at the egress proxy: answered %s: %s", what, res.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// countingReader counts the request bytes that went upstream. The transport reads the body on its own
// goroutine, which may still run when the answer has ended: the count is atomic.
type countingReader struct {
	r io.ReadCloser
	n atomic.Int64
	// size is the request's Content-Length (-1: unknown). Once that many bytes were read, Read answers io.EOF
	// without reading the body again: the transport's last read for the end of the body would otherwise race
	// with the server closing that body once the answer has started on a kept-alive connection, and a failed
	// read there makes the transport close the upstream connection mid-answer.
	size int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	if c.size >= 0 {
		left := c.size - c.n.Load()
		if left <= 0 {
			return 0, io.EOF
		}
		if int64(len(p)) > left {
			p = p[:left]
		}
	}
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func (c *countingReader) Close() error { return c.r.Close() }

// countingWriter counts the response bytes that reached the agent and keeps the status; it flushes through, so
// that ReverseProxy's flush after every write reaches the connection.
type countingWriter struct {
	http.ResponseWriter
	n      int64
	status int
	// now is the proxy's clock; first is when the answer's first byte (its status line) went to the agent.
	now   func() time.Time
	first time.Time
}

func (c *countingWriter) WriteHeader(code int) {
	if c.status == 0 {
		c.status = code
		c.first = c.now()
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
		c.first = c.now()
	}
	n, err := c.ResponseWriter.Write(p)
	c.n += int64(n)
	return n, err
}

func (c *countingWriter) Flush() {
	_ = http.NewResponseController(c.ResponseWriter).Flush()
}

func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }
