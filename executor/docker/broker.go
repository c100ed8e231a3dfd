package docker

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/kewplan/kewplan/egress"
	"github.com/kewplan/kewplan/executor/adapter"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/internal/brokerplan"
	"github.com/kewplan/kewplan/planner"
)

// Brokered credentials on Docker. A brokered node's proxy user gets a broker section (its runner's endpoints, a
// placeholder minted per credential for this run, the real value from kewplan's environment and the header it
// travels in); its container gets the placeholders under the credential names and its base-URL variable pointing
// at the proxy's broker endpoint on the node's allowlist network. When the node ends, apply tells the proxy on its
// control endpoint, and the placeholders are refused from then on.

// brokerNode is what the engine keeps of a brokered node: the placeholders its container gets, the path of its
// base URL, and its proxy user.
type brokerNode struct {
	user         string
	placeholders map[string]string // credential name -> placeholder
	endpoint     string            // the endpoint its base URL names
	path         string            // what the base URL has after the endpoint
}

// brokerConfig builds a brokered node's broker section, the real values from kewplan's environment; nil for a
// node whose credentials are forwarded.
func (d *dockerEngine) brokerConfig(np *planner.NodePlan, user string) (*egress.BrokerConfig, *brokerNode, error) {
	src := func(name string) (string, string, bool) {
		v := d.env[name]
		return v, "", v != "" // unset in kewplan's environment: the container gets no placeholder for it either
	}
	mint := func(name string) (string, error) {
		ph, err := egress.NewPlaceholder()
		if err == nil {
			d.run.AddSecret(ph, name) // harmless after the run, still never printed: masked as the credential it stands for
		}
		return ph, err
	}
	cfg, t, phs, err := brokerplan.Config(np, src, mint)
	if cfg == nil || err != nil {
		return nil, nil, err
	}
	return cfg, &brokerNode{user: user, placeholders: phs, endpoint: t.Endpoint, path: t.Path}, nil
}

// upstreamCA is the PEM of sandbox.egress.upstream_ca_file, read from the configuration's directory; "" for none.
func (d *dockerEngine) upstreamCA() (string, error) { return brokerplan.UpstreamCA(d.run.Config) }

// brokerEnv are the brokered node's container values: the placeholders under its credential names (in place of
// kewplan's environment) and its base-URL variable; nil maps for a node whose credentials are forwarded.
func (d *dockerEngine) brokerEnv(np *planner.NodePlan) (creds, baseURL map[string]string) {
	if d.egress == nil || d.egress.broker[np.Name] == nil || np.Container == nil || np.Container.BaseURL == "" {
		return nil, nil
	}
	bn := d.egress.broker[np.Name]
	return bn.placeholders, map[string]string{np.Container.BaseURL: d.egress.baseURLs[np.Name]}
}

// NodeEnded tells the proxy that a brokered node has ended: its placeholders are refused from then on.
func (d *dockerEngine) NodeEnded(ctx context.Context, np *planner.NodePlan) {
	if d.egress == nil || d.egress.broker[np.Name] == nil || d.egress.control == "" {
		return
	}
	user := d.egress.broker[np.Name].user
	d.nodeEndedAtProxy(user)
	if d.awaitProxy(ctx) != "" {
		return // the proxy is gone, and its placeholders with it
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := egress.EndNodeAt(ctx, d.egress.controlAddr, d.egress.control, user); err != nil {
		d.run.Warn(np.Name, fmt.Sprintf("could not tell the egress proxy that the node ended, so its placeholders stay usable until the proxy stops at the end of the run: %v", err))
	}
}

// attemptStarts tells the proxy that a brokered node's retry starts, so that its sums and caps start again from
// zero as the attempt's budget does. A retry whose proxy cannot be told does not start: its caps at the proxy
// would still hold the earlier attempts' spend.
func (d *dockerEngine) attemptStarts(ctx context.Context, at *adapter.Attempt) *adapter.Failure {
	np := at.Node
	if at.Number <= 1 || d.egress == nil || d.egress.broker[np.Name] == nil || d.egress.control == "" {
		return nil
	}
	if lost := d.awaitProxy(ctx); lost != "" {
		return proxyFailure(lost + "; attempt " + strconv.Itoa(at.Number) + " did not start")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := egress.StartAttemptAt(ctx, d.egress.controlAddr, d.egress.control, d.egress.broker[np.Name].user, at.Number); err != nil {
		return adapter.Failed(ledger.StatusFailed, fmt.Sprintf("attempt %d did not start: %v", at.Number, err))
	}
	return nil
}

// controlAddress is where the host reaches the proxy's control endpoint: its address on the proxy network.
func controlAddress(ip net.IP) string {
	return net.JoinHostPort(ip.String(), strconv.Itoa(egress.DefaultPort))
}
