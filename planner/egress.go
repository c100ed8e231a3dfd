package planner

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/kewplan/kewplan/config"
)

// Origins of an egress host: where the configuration allowed it.
const (
	EgressFromRunner  = "runner"  // the runner's model endpoint (built in, or a runner block's endpoints)
	EgressFromSandbox = "sandbox" // the sandbox's egress block: every node
	EgressFromNode    = "node"    // the node's own egress block
)

// OpenNetwork is the user-defined bridge network kewplan puts `network = "open"` nodes on, instead of Docker's
// default docker0 bridge (CIS 5.30): apply creates it (inter-container traffic off) and removes it like the proxy.
const OpenNetwork = "kewplan-open"

// Proxy environment of an allowlist node's container. The proxy variables are forwarded by name, like credentials:
// their values hold the node's proxy secret (http://<node>:<secret>@<proxy>), which apply supplies from the egress
// proxy it starts, never from kewplan's own environment, so no value is in the argv. NO_PROXY keeps loopback
// traffic off the proxy and is no secret, so the argv carries its value.
var ProxyVariables = []string{"HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"}

const (
	NoProxyVariable = "NO_PROXY"
	NoProxyValue    = "localhost,127.0.0.1,::1"
	// ClosedDNS is the upstream Docker's embedded resolver (127.0.0.11) forwards an allowlist container's queries
	// to. The engine resolves a --dns upstream inside the container's network namespace, where nothing listens on
	// loopback, so no external name resolves and no query leaves: the agent reaches the proxy by address, and only
	// the proxy resolves names (DNS is an exfiltration path, CVE-2024-29018).
	ClosedDNS = "127.0.0.1"
)

// EgressHost is one host a node may reach through the egress proxy, with the origins that allowed it.
type EgressHost struct {
	Host    string   // a host name or a "*.suffix" wildcard, normalised
	Port    int      // 443 unless the entry said otherwise
	Origins []string // EgressFromRunner, EgressFromSandbox, EgressFromNode: each that lists it, in that order
}

// String is the entry as written in configuration: "host" for port 443, "host:port" otherwise.
func (h EgressHost) String() string {
	return config.HostPattern{Host: h.Host, Port: h.Port}.String()
}

// Pattern is the entry as a config.HostPattern (without a range).
func (h EgressHost) Pattern() config.HostPattern {
	return config.HostPattern{Host: h.Host, Port: h.Port}
}

// runnerEndpoints are a runner's model endpoints: a runner block's endpoints when written, else the built-in's.
func (r *resolvedRunner) endpoints() []config.HostPattern { return r.hosts }

// parseEndpoints reads the runner's endpoints: its block's, else the built-in's.
func (r *resolvedRunner) parseEndpoints() []config.HostPattern {
	if r.decl != nil && r.decl.Endpoints != nil {
		return r.decl.Endpoints
	}
	if r.builtin == nil {
		return nil
	}
	var out []config.HostPattern
	for _, e := range r.builtin.Endpoints() {
		if hp, msg := config.ParseHostPattern(e); msg == "" {
			out = append(out, hp)
		}
	}
	return out
}

// planEgress resolves the hosts an allowlist node may reach: its runner's endpoints, the sandbox's list and its
// own, sorted by host and port, one entry per host with every origin that allows it. An open node gets nil: it
// reaches any host, which the network rules say.
func (b *builder) planEgress(np *NodePlan, n *config.Node, r *resolvedRunner) {
	if b.cfg.Sandbox.Network == config.NetworkOpen {
		return
	}
	byKey := map[string]*EgressHost{}
	add := func(ps []config.HostPattern, origin string) {
		for _, p := range ps {
			key := p.String()
			h := byKey[key]
			if h == nil {
				h = &EgressHost{Host: p.Host, Port: p.Port}
				byKey[key] = h
			}
			if !contains(h.Origins, origin) {
				h.Origins = append(h.Origins, origin)
			}
		}
	}
	if r != nil {
		add(r.endpoints(), EgressFromRunner)
	}
	add(b.cfg.Sandbox.Egress.Allow, EgressFromSandbox)
	if n.Egress != nil {
		add(n.Egress.Allow, EgressFromNode)
	}
	private := map[string]bool{}
	for _, p := range b.cfg.Sandbox.Egress.PrivateHosts {
		private[p.String()] = true
	}
	if n.Egress != nil {
		for _, p := range n.Egress.PrivateHosts {
			private[p.String()] = true
		}
	}
	np.PrivateHosts = nil
	if len(private) > 0 {
		np.PrivateHosts = slices.Sorted(maps.Keys(private))
	}
	np.Egress = make([]EgressHost, 0, len(byKey))
	for _, h := range byKey {
		np.Egress = append(np.Egress, *h)
	}
	sort.Slice(np.Egress, func(i, j int) bool {
		a, c := np.Egress[i], np.Egress[j]
		if a.Host != c.Host {
			return a.Host < c.Host
		}
		return a.Port < c.Port
	})
}

// DescribeEgress is the one-line account of a node's reach for reviewers: "api.anthropic.com (runner), github.com
// (sandbox)", "any host (network open)", or "no host".
func DescribeEgress(network string, hosts []EgressHost) string {
	if network == config.NetworkOpen {
		return "any host (network open)"
	}
	if len(hosts) == 0 {
		return "no host"
	}
	parts := make([]string, len(hosts))
	for i, h := range hosts {
		parts[i] = fmt.Sprintf("%s (%s)", h.String(), strings.Join(h.Origins, ", "))
	}
	return strings.Join(parts, ", ")
}

// egressRange is where a node's egress host is written, for diagnostics: the node's own entry, then the sandbox's,
// then the runner block's; the node's runner attribute when the host is a built-in endpoint.
func egressRange(cfg *config.Config, n *config.Node, h EgressHost) hcl.Range {
	find := func(ps []config.HostPattern) (hcl.Range, bool) {
		for _, p := range ps {
			if p.Host == h.Host && p.Port == h.Port && p.Range.Filename != "" {
				return p.Range, true
			}
		}
		return hcl.Range{}, false
	}
	if n != nil && n.Egress != nil {
		if r, ok := find(n.Egress.Allow); ok {
			return r
		}
	}
	if cfg.Sandbox != nil {
		if r, ok := find(cfg.Sandbox.Egress.Allow); ok {
			return r
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Runners)) {
		if r, ok := find(cfg.Runners[name].Endpoints); ok {
			return r
		}
	}
	if n != nil {
		if a := n.Attrs["runner"]; a != nil && contains(h.Origins, EgressFromRunner) {
			return a.Range // a built-in endpoint comes with the runner the node names
		}
		return n.DeclRange
	}
	return hcl.Range{}
}
