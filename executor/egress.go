package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/egress"
	"github.com/kewplan/kewplan/executor/engine"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/planner"
)

// Labels and names of what apply starts for egress.
const (
	// LabelRole says what a kewplan container or network is when it is not a node's: RoleEgressProxy for the
	// proxy, RoleOpenNetwork for the network of `network = "open"` nodes.
	LabelRole       = "kewplan.role"
	RoleEgressProxy = "egress-proxy"
	RoleOpenNetwork = "open-network"
	// LabelStateDir names the state directory of the apply that started the proxy, so that the orphan sweep of a
	// later apply in the same state directory removes a proxy its killed predecessor left (the proxy starts
	// before the run is in the ledger).
	LabelStateDir = "kewplan.state-dir"
	// EgressProxyPrefix starts the proxy container's name: kew-egress-<run>.
	EgressProxyPrefix = "kew-egress-"
	// MaxEgressDenials bounds the denials one run records one by one (ledger rows, events, summary): an agent
	// that hammers the proxy must not fill the host's disk. Denials past it are counted only.
	MaxEgressDenials = 1000
	// egressProxyMemory and egressProxyPids bound the proxy like an agent.
	egressProxyMemory = 256 << 20
	egressProxyPids   = 256
	// egressProbeTimeout bounds how long apply waits for its proxy to answer.
	egressProbeTimeout = 20 * time.Second
)

// egressState is the apply's egress proxy: kewplan's own container, or an existing proxy named by
// sandbox.egress.proxy, and what it refused.
type egressState struct {
	svc     *engine.Service
	name    string
	urls    map[string]string // node name -> proxy URL (holds the node's secret)
	secrets []string          // values masked wherever a string leaves apply
	users   map[string]string // proxy user -> node name
	stderr  *tailWriter
	lines   *lineWriter

	mu      sync.Mutex
	denials []ledger.EgressDenial
	total   int
}

// egressEnv is the proxy environment of a node's container (nil when the node is not proxied).
func (a *applier) egressEnv(node string) map[string]string {
	if a.egress == nil || a.egress.urls[node] == "" {
		return nil
	}
	return egress.ContainerEnv(a.egress.urls[node])
}

// maskEgress replaces every proxy secret (and an existing proxy's URL credentials) in s.
func (a *applier) maskEgress(s string) string {
	if a.egress == nil {
		return s
	}
	for _, v := range a.egress.secrets {
		if len(v) >= 6 && strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, "[redacted proxy secret]")
		}
	}
	return s
}

// egressSettings are the sandbox's egress settings, or the defaults when apply has no configuration.
func (a *applier) egressSettings() config.SandboxEgress {
	if a.opts.Config != nil && a.opts.Config.Sandbox != nil {
		e := a.opts.Config.Sandbox.Egress
		if e.ProxyNetwork == "" {
			e.ProxyNetwork = config.DefaultProxyNetwork
		}
		return e
	}
	return config.SandboxEgress{ProxyNetwork: config.DefaultProxyNetwork}
}

// proxiedNodes are the nodes that reach hosts through the proxy: allowlist nodes with egress hosts.
func (a *applier) proxiedNodes() []*planner.NodePlan {
	var out []*planner.NodePlan
	for _, np := range a.opts.Plan.Nodes {
		if np.Network != config.NetworkOpen && len(np.Egress) > 0 {
			out = append(out, np)
		}
	}
	return out
}

// startNetworking prepares the networks and the proxy before any node starts: the open network when a node is
// open, and the egress proxy when a node is proxied. A failure is a *PreflightError that says what to do; nothing
// is left behind.
func (a *applier) startNetworking(ctx context.Context) error {
	var problems []string
	for _, np := range a.opts.Plan.Nodes {
		if np.Network == config.NetworkOpen {
			if err := a.ensureOpenNetwork(ctx); err != nil {
				problems = append(problems, err.Error())
			}
			break
		}
	}
	if nodes := a.proxiedNodes(); len(nodes) > 0 {
		var err error
		if proxy := a.egressSettings().Proxy; proxy != "" {
			err = a.useExistingProxy(ctx, proxy, nodes)
		} else {
			err = a.startEgressProxy(ctx, nodes)
		}
		if err != nil {
			problems = append(problems, a.maskEgress(err.Error()))
		}
	}
	if len(problems) > 0 {
		a.stopEgress()
		return &PreflightError{Problems: problems}
	}
	return nil
}

// ensureOpenNetwork creates planner.OpenNetwork when it is missing: a user-defined bridge with inter-container
// traffic off, so open nodes reach the internet but not each other nor other containers on docker0. It is kept
// for later applies (removing it could pull it from under a concurrent apply of another state directory).
func (a *applier) ensureOpenNetwork(ctx context.Context) error {
	info, err := a.engine.InspectNetwork(ctx, planner.OpenNetwork)
	if err == nil {
		if info.Internal {
			return fmt.Errorf("the network %q exists but is --internal, so open nodes could reach nothing; remove it with `docker network rm %s` and kewplan creates it again", planner.OpenNetwork, planner.OpenNetwork)
		}
		return nil
	}
	if !errors.Is(err, engine.ErrNotFound) {
		return err
	}
	_, err = a.engine.CreateBridge(ctx, planner.OpenNetwork, false, map[string]string{LabelRole: RoleOpenNetwork},
		map[string]string{"com.docker.network.bridge.enable_icc": "false"})
	if err != nil {
		if _, again := a.engine.InspectNetwork(ctx, planner.OpenNetwork); again == nil {
			return nil // a concurrent apply created it first
		}
		return fmt.Errorf("open nodes need the network %q and kewplan could not create it: %v", planner.OpenNetwork, err)
	}
	return nil
}

// useExistingProxy probes sandbox.egress.proxy and gives every proxied node its URL. The proxy's own allowlist
// decides; kewplan records no denial for it.
func (a *applier) useExistingProxy(ctx context.Context, proxy string, nodes []*planner.NodePlan) error {
	u, err := url.Parse(proxy)
	if err != nil || u.Host == "" {
		return errors.New("sandbox egress proxy is not a URL of the form http://host:port")
	}
	st := &egressState{urls: map[string]string{}, users: map[string]string{}}
	if pw, ok := u.User.Password(); ok {
		st.secrets = append(st.secrets, pw, proxy)
	}
	a.egress = st
	hostport := u.Host
	if u.Port() == "" {
		hostport = net.JoinHostPort(u.Hostname(), "3128")
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := egress.ProbeConnect(pctx, hostport); err != nil {
		return fmt.Errorf("the egress proxy %s named by sandbox.egress.proxy does not answer (%v); start it, or remove `proxy` to let kewplan start its own", u.Redacted(), err)
	}
	for _, np := range nodes {
		st.urls[np.Name] = proxy
	}
	return nil
}

// proxyUserPattern is what the proxy accepts as a node name (egress.NodeConfig.Name).
var proxyUserPattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,62}$`)

// startEgressProxy builds (when missing) the proxy image from kewplan's static binary, starts one proxy for the
// apply on the allowlist network and proxy_network with one allowlist and secret per node, and probes it.
func (a *applier) startEgressProxy(ctx context.Context, nodes []*planner.NodePlan) error {
	settings := a.egressSettings()
	info, err := a.engine.InspectNetwork(ctx, settings.ProxyNetwork)
	switch {
	case errors.Is(err, engine.ErrNotFound):
		return fmt.Errorf("the proxy network %q (sandbox.egress.proxy_network) does not exist, so kewplan's egress proxy could not reach out; create it with `docker network create %s`, or name an existing network with a route out", settings.ProxyNetwork, settings.ProxyNetwork)
	case err != nil:
		return err
	case info.Internal:
		return fmt.Errorf("the proxy network %q (sandbox.egress.proxy_network) is --internal, so kewplan's egress proxy could not reach any host; name a network with a route out (the default is \"bridge\")", settings.ProxyNetwork)
	}
	image, err := a.egressImage(ctx)
	if err != nil {
		return err
	}

	st := &egressState{name: EgressProxyPrefix + a.runID, urls: map[string]string{}, users: map[string]string{}, stderr: &tailWriter{max: 2048}}
	a.egress = st
	cfg := egress.Config{Listen: egress.DefaultListen, AllowPrivateAddresses: a.opts.EgressAllowPrivateAddresses}
	allowlists := map[string]bool{}
	secrets := map[string]string{}
	for i, np := range nodes {
		user := np.Slug
		if !proxyUserPattern.MatchString(user) || st.users[user] != "" {
			user = "node" + strconv.Itoa(i+1)
		}
		secret, err := egress.NewSecret()
		if err != nil {
			return err
		}
		allow := make([]string, len(np.Egress))
		for j, h := range np.Egress {
			allow[j] = h.String()
		}
		cfg.Nodes = append(cfg.Nodes, egress.NodeConfig{Name: user, Secret: secret, Allow: allow})
		st.users[user] = np.Name
		st.secrets = append(st.secrets, secret)
		secrets[np.Name] = user + "\x00" + secret
		if np.Container != nil {
			allowlists[np.Container.Network] = true
		} else if a.opts.Config != nil && a.opts.Config.Sandbox != nil {
			allowlists[a.opts.Config.Sandbox.AllowlistNetwork] = true
		}
	}
	stdin, err := json.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("egress proxy configuration: %w", err)
	}
	networks := []string{settings.ProxyNetwork}
	for n := range allowlists {
		if n != "" && n != settings.ProxyNetwork {
			networks = append(networks, n)
		}
	}
	st.lines = &lineWriter{max: 64 << 10, line: a.egressDecision}
	svc, err := a.engine.StartService(ctx, engine.ServiceSpec{
		Name: st.name, Image: image, User: egress.ImageUser,
		Labels: map[string]string{
			LabelRole: RoleEgressProxy, planner.LabelRun: a.runID, LabelPID: strconv.Itoa(a.pid), LabelStateDir: a.stateDir,
		},
		Networks: networks, Memory: egressProxyMemory, PidsLimit: egressProxyPids,
	}, stdin, st.lines, st.stderr)
	if err != nil {
		return fmt.Errorf("kewplan's egress proxy could not start: %v", err)
	}
	st.svc = svc
	a.janitor.addContainer(svc.ID)

	probeIP, err := svc.IPAddress(ctx, settings.ProxyNetwork)
	if err != nil {
		return err
	}
	if err := a.probeEgress(ctx, svc, net.JoinHostPort(probeIP.String(), strconv.Itoa(egress.DefaultPort))); err != nil {
		return err
	}
	for _, np := range nodes {
		netName := ""
		if np.Container != nil {
			netName = np.Container.Network
		} else if a.opts.Config != nil && a.opts.Config.Sandbox != nil {
			netName = a.opts.Config.Sandbox.AllowlistNetwork
		}
		ip, err := svc.IPAddress(ctx, netName)
		if err != nil {
			return err
		}
		user, secret, _ := strings.Cut(secrets[np.Name], "\x00")
		st.urls[np.Name] = egress.ProxyURL(ip.String(), egress.DefaultPort, user, secret)
	}
	return nil
}

// probeEgress waits until the proxy answers its health probe, the proxy exits, or egressProbeTimeout passes.
func (a *applier) probeEgress(ctx context.Context, svc *engine.Service, addr string) error {
	pctx, cancel := context.WithTimeout(ctx, egressProbeTimeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		one, cancelOne := context.WithTimeout(pctx, 2*time.Second)
		last = egress.Probe(one, addr)
		cancelOne()
		if last == nil {
			return nil
		}
		if running, code, err := svc.Running(pctx); err == nil && !running {
			return fmt.Errorf("kewplan's egress proxy exited (status %d) before it answered; its last words: %s", code, a.egressStderr())
		}
		select {
		case <-pctx.Done():
			return fmt.Errorf("kewplan's egress proxy did not answer its probe within %s (%v); its last words: %s", egressProbeTimeout, last, a.egressStderr())
		case <-tick.C:
		}
	}
}

func (a *applier) egressStderr() string {
	if a.egress == nil || a.egress.stderr == nil {
		return "(none)"
	}
	a.egress.stderr.mu.Lock()
	s := strings.TrimSpace(strings.ToValidUTF8(string(a.egress.stderr.buf), "\uFFFD"))
	a.egress.stderr.mu.Unlock()
	if s == "" {
		return "(none)"
	}
	return s
}

// egressDecision reads one line of the proxy's decision log: a denial is recorded in the ledger, then reported.
func (a *applier) egressDecision(line []byte) {
	var d egress.Decision
	if err := json.Unmarshal(line, &d); err != nil || d.Allowed {
		return
	}
	st := a.egress
	node := st.users[d.Node]
	if node == "" && d.Node != "" {
		node = d.Node
	}
	t := d.Time
	if t.IsZero() {
		t = time.Now()
	}
	den := ledger.EgressDenial{RunID: a.runID, Node: node, Method: clipText(d.Method, 16), Host: clipText(d.Host, 260), Port: d.Port, Reason: clipText(d.Reason, 200), Time: t}
	st.mu.Lock()
	st.total++
	keep := st.total <= MaxEgressDenials
	if keep {
		st.denials = append(st.denials, den)
	}
	st.mu.Unlock()
	if !keep {
		return
	}
	if a.ledger != nil {
		if err := a.ledger.RecordEgressDenial(den); err != nil {
			a.warn(node, err.Error())
		}
	}
	a.hook.EgressDenied(den)
}

func clipText(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) > n {
		return s[:n]
	}
	return s
}

// stopEgress removes kewplan's proxy (idempotent) and waits for its decision log to end.
func (a *applier) stopEgress() {
	if a.egress == nil || a.egress.svc == nil {
		return
	}
	if err := a.egress.svc.Stop(); err != nil {
		a.warn("", fmt.Sprintf("could not remove the egress proxy %s: %v", a.egress.name, err))
	}
	a.janitor.dropContainer(a.egress.svc.ID)
	if a.egress.lines != nil {
		a.egress.lines.flush()
	}
}

// egressSummary fills the summary's denials once the proxy is gone.
func (a *applier) egressSummary(sum *ApplySummary) {
	if a.egress == nil {
		return
	}
	a.egress.mu.Lock()
	defer a.egress.mu.Unlock()
	sum.EgressDenials = append([]ledger.EgressDenial(nil), a.egress.denials...)
	sum.EgressDeniedTotal = a.egress.total
}

// ownedEgressProxy reports whether a listed container is a proxy an apply of this state directory started.
func (a *applier) ownedEgressProxy(labels map[string]string) bool {
	return labels[LabelRole] == RoleEgressProxy && labels[LabelStateDir] == a.stateDir
}

// lineWriter calls line for each complete line written to it; a line longer than max is dropped whole.
type lineWriter struct {
	mu   sync.Mutex
	max  int
	buf  []byte
	skip bool
	line func([]byte)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if !w.skip {
				w.buf = append(w.buf, p...)
				if len(w.buf) > w.max {
					w.buf, w.skip = w.buf[:0], true
				}
			}
			break
		}
		if !w.skip {
			w.buf = append(w.buf, p[:i]...)
			if len(w.buf) <= w.max {
				w.line(w.buf)
			}
		}
		w.buf, w.skip = w.buf[:0], false
		p = p[i+1:]
	}
	return n, nil
}

// flush hands over a last line without its newline.
func (w *lineWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 && !w.skip {
		w.line(w.buf)
	}
	w.buf = w.buf[:0]
}

var _ io.Writer = (*lineWriter)(nil)
