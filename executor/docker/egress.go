package docker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/egress"
	"github.com/kewplan/kewplan/executor/adapter"
	"github.com/kewplan/kewplan/executor/engine"
	"github.com/kewplan/kewplan/planner"
)

// Labels and names of what apply starts for egress.
const (
	// LabelRole says what a kewplan container or network is when it is not a node's: RoleEgressProxy for the
	// proxy, RoleOpenNetwork for the network of `network = "open"` nodes.
	LabelRole       = "kewplan.role"
	RoleEgressProxy = "egress-proxy"
	RoleOpenNetwork = "open-network"
	// RoleEgressNetwork is the container that holds the egress proxy's network namespace (proxywatch.go).
	RoleEgressNetwork = "egress-network"
	// LabelStateDir names the state directory of the apply that started the proxy, so that the orphan sweep of a
	// later apply in the same state directory removes a proxy its killed predecessor left (the proxy starts
	// before the run is in the ledger).
	LabelStateDir = "kewplan.state-dir"
	// EgressProxyPrefix starts the name of the container that holds the proxy's addresses: kew-egress-<run>. The
	// proxy's process runs in its network namespace, in kew-egress-<run>-proxy (proxywatch.go).
	EgressProxyPrefix = "kew-egress-"
	// egressProxyMemory and egressProxyPids bound the proxy like an agent.
	egressProxyMemory = 256 << 20
	egressProxyPids   = 256
	// egressProbeTimeout bounds how long apply waits for its proxy to answer.
	egressProbeTimeout = 20 * time.Second
)

// egressState is the apply's egress proxy: kewplan's own container, or an existing proxy named by
// sandbox.egress.proxy, and what it refused.
type egressState struct {
	// mu guards what the proxy's watch replaces when it starts the proxy again: svc, stderr, lines and the
	// watch's own fields (proxywatch.go).
	mu      sync.Mutex
	svc     *engine.Service
	name    string
	urls    map[string]string // node name -> proxy URL (holds the node's secret)
	secrets []string          // values masked wherever a string leaves apply
	users   map[string]string // proxy user -> node name
	stderr  *adapter.TailWriter
	lines   *adapter.ProxyLog // the proxy's decision log, read into the ledger
	// broker holds each brokered node (by node name), baseURLs its base URL; control is the secret of the
	// proxy's control endpoint at controlAddr ("" when no node is brokered).
	broker      map[string]*brokerNode
	baseURLs    map[string]string
	control     string
	controlAddr string
	// restart is what the watch needs to start the same proxy again (nil for an operator's proxy).
	restart *proxyRestart
}

// egressEnv is the proxy environment of a node's container (nil when the node is not proxied).
func (d *dockerEngine) egressEnv(node string) map[string]string {
	if d.egress == nil || d.egress.urls[node] == "" {
		return nil
	}
	return egress.ContainerEnv(d.egress.urls[node])
}

// maskEgress replaces every proxy secret (and an existing proxy's URL credentials) in s.
func (d *dockerEngine) maskEgress(s string) string {
	if d.egress == nil {
		return s
	}
	for _, v := range d.egress.secrets {
		if len(v) >= 6 && strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, "[redacted proxy secret]")
		}
	}
	return s
}

// egressSettings are the sandbox's egress settings, or the defaults when apply has no configuration.
func (d *dockerEngine) egressSettings() config.SandboxEgress {
	if d.run.Config != nil && d.run.Config.Sandbox != nil {
		e := d.run.Config.Sandbox.Egress
		if e.ProxyNetwork == "" {
			e.ProxyNetwork = config.DefaultProxyNetwork
		}
		return e
	}
	return config.SandboxEgress{ProxyNetwork: config.DefaultProxyNetwork}
}

// proxiedNodes are the nodes that reach hosts through the proxy: allowlist nodes with egress hosts.
func (d *dockerEngine) proxiedNodes() []*planner.NodePlan {
	var out []*planner.NodePlan
	for _, np := range d.run.Plan.Nodes {
		if np.Network != config.NetworkOpen && len(np.Egress) > 0 {
			out = append(out, np)
		}
	}
	return out
}

// startNetworking prepares the networks and the proxy before any node starts: the open network when a node is
// open, and the egress proxy when a node is proxied. A failure is a *PreflightError that says what to do; nothing
// is left behind.
func (d *dockerEngine) startNetworking(ctx context.Context) error {
	var problems []string
	for _, np := range d.run.Plan.Nodes {
		if np.Network == config.NetworkOpen {
			if err := d.ensureOpenNetwork(ctx); err != nil {
				problems = append(problems, err.Error())
			}
			break
		}
	}
	if nodes := d.proxiedNodes(); len(nodes) > 0 {
		var err error
		if proxy := d.egressSettings().Proxy; proxy != "" {
			err = d.useExistingProxy(ctx, proxy, nodes)
		} else {
			err = d.startEgressProxy(ctx, nodes)
		}
		if err != nil {
			problems = append(problems, d.maskEgress(err.Error()))
		}
	}
	if len(problems) > 0 {
		d.stopEgress()
		return &adapter.PreflightError{Problems: problems}
	}
	return nil
}

// ensureOpenNetwork creates planner.OpenNetwork when it is missing: a user-defined bridge with inter-container
// traffic off, so open nodes reach the internet but not each other nor other containers on docker0. It is kept
// for later applies (removing it could pull it from under a concurrent apply of another state directory).
func (d *dockerEngine) ensureOpenNetwork(ctx context.Context) error {
	info, err := d.engine.InspectNetwork(ctx, planner.OpenNetwork)
	if err == nil {
		if info.Internal {
			return fmt.Errorf("the network %q exists but is --internal, so open nodes could reach nothing; remove it with `docker network rm %s` and kewplan creates it again", planner.OpenNetwork, planner.OpenNetwork)
		}
		return nil
	}
	if !errors.Is(err, engine.ErrNotFound) {
		return err
	}
	_, err = d.engine.CreateBridge(ctx, planner.OpenNetwork, false, map[string]string{LabelRole: RoleOpenNetwork},
		map[string]string{"com.docker.network.bridge.enable_icc": "false"})
	if err != nil {
		if _, again := d.engine.InspectNetwork(ctx, planner.OpenNetwork); again == nil {
			return nil // a concurrent apply created it first
		}
		return fmt.Errorf("open nodes need the network %q and kewplan could not create it: %v", planner.OpenNetwork, err)
	}
	return nil
}

// useExistingProxy probes sandbox.egress.proxy and gives every proxied node its URL. The proxy's own allowlist
// decides; kewplan records no denial for it.
func (d *dockerEngine) useExistingProxy(ctx context.Context, proxy string, nodes []*planner.NodePlan) error {
	u, err := url.Parse(proxy)
	if err != nil || u.Host == "" {
		return errors.New("sandbox egress proxy is not a URL of the form http://host:port")
	}
	st := &egressState{urls: map[string]string{}, users: map[string]string{}}
	if pw, ok := u.User.Password(); ok {
		st.secrets = append(st.secrets, pw, proxy)
		d.run.AddSecret(pw, "proxy secret")
		d.run.AddSecret(proxy, "proxy secret")
	}
	d.egress = st
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
func (d *dockerEngine) startEgressProxy(ctx context.Context, nodes []*planner.NodePlan) error {
	settings := d.egressSettings()
	info, err := d.engine.InspectNetwork(ctx, settings.ProxyNetwork)
	switch {
	case errors.Is(err, engine.ErrNotFound):
		return fmt.Errorf("the proxy network %q (sandbox.egress.proxy_network) does not exist, so kewplan's egress proxy could not reach out; create it with `docker network create %s`, or name an existing network with a route out", settings.ProxyNetwork, settings.ProxyNetwork)
	case err != nil:
		return err
	case info.Internal:
		return fmt.Errorf("the proxy network %q (sandbox.egress.proxy_network) is --internal, so kewplan's egress proxy could not reach any host; name a network with a route out (the default is \"bridge\")", settings.ProxyNetwork)
	}
	image, err := d.egressImage(ctx)
	if err != nil {
		return err
	}

	st := &egressState{name: EgressProxyPrefix + d.run.ID, urls: map[string]string{}, users: map[string]string{}, stderr: &adapter.TailWriter{Max: 2048},
		broker: map[string]*brokerNode{}, baseURLs: map[string]string{}}
	d.egress = st
	cfg := egress.Config{Listen: egress.DefaultListen, AllowPrivateAddresses: d.run.EgressAllowPrivateAddresses}
	if cfg.UpstreamCAPEM, err = d.upstreamCA(); err != nil {
		return err
	}
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
		bc, bn, err := d.brokerConfig(np, user)
		if err != nil {
			return err
		}
		if bn != nil {
			st.broker[np.Name] = bn
			// The backstop: the placeholders die at the latest the node can end, should apply never say it ended.
			ends := adapter.BrokerEndsAt(d.run.Plan, np, time.Now())
			bc.EndsAt = &ends
		}
		cfg.Nodes = append(cfg.Nodes, egress.NodeConfig{Name: user, Secret: secret, Allow: allow, PrivateHosts: np.PrivateHosts, Broker: bc})
		st.users[user] = np.Name
		st.secrets = append(st.secrets, secret)
		d.run.AddSecret(secret, "proxy secret")
		secrets[np.Name] = user + "\x00" + secret
		if np.Container != nil {
			allowlists[np.Container.Network] = true
		} else if d.run.Config != nil && d.run.Config.Sandbox != nil {
			allowlists[d.run.Config.Sandbox.AllowlistNetwork] = true
		}
	}
	if len(st.broker) > 0 {
		if st.control, err = egress.NewSecret(); err != nil {
			return err
		}
		cfg.ControlSecret = st.control
		d.run.AddSecret(st.control, "proxy secret")
	}
	networks := []string{settings.ProxyNetwork}
	for n := range allowlists {
		if n != "" && n != settings.ProxyNetwork {
			networks = append(networks, n)
		}
	}
	svc, keeper, err := d.startProxyContainers(ctx, image, networks, &cfg)
	if err != nil {
		return err
	}
	probeIP, err := keeper.IPAddress(ctx, settings.ProxyNetwork)
	if err != nil {
		return err
	}
	if err := d.probeEgress(ctx, svc, net.JoinHostPort(probeIP.String(), strconv.Itoa(egress.DefaultPort))); err != nil {
		return err
	}
	st.controlAddr = controlAddress(net.IP(probeIP.AsSlice()))
	for _, np := range nodes {
		netName := ""
		if np.Container != nil {
			netName = np.Container.Network
		} else if d.run.Config != nil && d.run.Config.Sandbox != nil {
			netName = d.run.Config.Sandbox.AllowlistNetwork
		}
		ip, err := keeper.IPAddress(ctx, netName)
		if err != nil {
			return err
		}
		user, secret, _ := strings.Cut(secrets[np.Name], "\x00")
		st.urls[np.Name] = egress.ProxyURL(ip.String(), egress.DefaultPort, user, secret)
		if bn := st.broker[np.Name]; bn != nil {
			st.baseURLs[np.Name] = egress.BrokerBaseURL(ip.String(), egress.DefaultPort, user, secret, bn.endpoint, bn.path)
		}
	}
	d.watchEgress()
	return nil
}

// probeEgress waits until the proxy answers its health probe, the proxy exits, or egressProbeTimeout passes.
func (d *dockerEngine) probeEgress(ctx context.Context, svc *engine.Service, addr string) error {
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
			return fmt.Errorf("kewplan's egress proxy exited (status %d) before it answered; its last words: %s", code, d.egressStderr())
		}
		select {
		case <-pctx.Done():
			return fmt.Errorf("kewplan's egress proxy did not answer its probe within %s (%v); its last words: %s", egressProbeTimeout, last, d.egressStderr())
		case <-tick.C:
		}
	}
}

func (d *dockerEngine) egressStderr() string {
	if d.egress == nil {
		return "(none)"
	}
	d.egress.mu.Lock()
	tail := d.egress.stderr
	d.egress.mu.Unlock()
	if tail == nil {
		return "(none)"
	}
	s := tail.String()
	if s == "" {
		return "(none)"
	}
	return s
}

// stopEgress stops the proxy's watch, removes kewplan's proxy and the container holding its addresses
// (idempotent), waits for its decision log to end and removes the broker's state.
func (d *dockerEngine) stopEgress() {
	if d.egress == nil {
		return
	}
	st := d.egress
	st.stopWatch()
	st.mu.Lock()
	svc, lines := st.svc, st.lines
	st.mu.Unlock()
	if svc != nil {
		if err := svc.Stop(); err != nil {
			d.run.Warn("", fmt.Sprintf("could not remove the egress proxy %s: %v", svc.Name, err))
		}
		d.track(svc.ID, false)
	}
	if r := st.restart; r != nil {
		if err := r.keeper.Stop(); err != nil {
			d.run.Warn("", fmt.Sprintf("could not remove the egress proxy's network container %s: %v", r.keeper.Name, err))
		}
		d.track(r.keeper.ID, false)
		if r.stateDir != "" {
			if err := os.RemoveAll(r.stateDir); err != nil {
				d.run.Warn("", fmt.Sprintf("could not remove the egress proxy's broker state %s: %v", r.stateDir, err))
			}
		}
	}
	if lines != nil {
		lines.Flush()
	}
}

// ownedEgressProxy reports whether a listed container is a proxy an apply of this state directory started.
func (d *dockerEngine) ownedEgressProxy(labels map[string]string) bool {
	return (labels[LabelRole] == RoleEgressProxy || labels[LabelRole] == RoleEgressNetwork) && labels[LabelStateDir] == d.run.Dir.Root
}
