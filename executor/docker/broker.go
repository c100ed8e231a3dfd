package docker

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/egress"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/planner"
	"github.com/kewplan/kewplan/runners"
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

// brokerConfig builds a brokered node's broker section; nil for a node whose credentials are forwarded.
func (d *dockerEngine) brokerConfig(np *planner.NodePlan, user string) (*egress.BrokerConfig, *brokerNode, error) {
	if np.CredentialMode != config.CredentialsBrokered || len(np.BrokeredEndpoints) == 0 {
		return nil, nil, nil
	}
	bu, builtin := runners.BrokeredBaseURL(np.Runner)
	api := egress.BrokerAPIOpenAI
	if np.Protocol == "claude-code" {
		api = egress.BrokerAPIAnthropic
	}
	if builtin && bu.API != "" {
		api = bu.API
	}
	bn := &brokerNode{user: user, placeholders: map[string]string{}, endpoint: np.BrokeredEndpoints[0]}
	if builtin && bu.Endpoint != "" {
		for _, e := range np.BrokeredEndpoints {
			if e == bu.Endpoint {
				bn.endpoint, bn.path = bu.Endpoint, bu.Path
			}
		}
	}
	cfg := &egress.BrokerConfig{API: api, Endpoints: append([]string(nil), np.BrokeredEndpoints...)}
	cfg.Price, cfg.Budget = brokerBudget(np)
	for _, name := range np.Credentials {
		value := d.env[name]
		if value == "" {
			continue // unset in kewplan's environment: the container gets no placeholder for it either
		}
		ph, err := egress.NewPlaceholder()
		if err != nil {
			return nil, nil, err
		}
		header, scheme := "Authorization", "Bearer"
		if h, ok := runners.CredentialHeaderOf(name); ok {
			header, scheme = h.Header, h.Scheme
		} else if api == egress.BrokerAPIAnthropic {
			header, scheme = "x-api-key", ""
		}
		cfg.Credentials = append(cfg.Credentials, egress.BrokerCredential{Name: name, Placeholder: ph, Value: value, Header: header, Scheme: scheme})
		bn.placeholders[name] = ph
		d.run.AddSecret(ph, name) // harmless after the run, still never printed: masked as the credential it stands for
	}
	return cfg, bn, nil
}

// brokerBudget is what the proxy needs to meter and cap a brokered node: its model's price (nil: none) and its
// caps, with the file that declares the node for the refusal's advice (a node budget block there overrides the
// sandbox's attribute by attribute). The apply-wide max_usd is apply's to enforce: it stops every node.
func brokerBudget(np *planner.NodePlan) (*egress.BrokerPrice, *egress.BrokerBudget) {
	nb := np.Budget
	if nb == nil {
		return nil, nil
	}
	var price *egress.BrokerPrice
	if nb.Price != nil {
		p := nb.Price.Price
		price = &egress.BrokerPrice{Input: p.Input, Output: p.Output, CacheRead: p.CacheRead, CacheWrite: p.CacheWrite}
	}
	b := &egress.BrokerBudget{}
	if nb.MaxUSD != nil {
		b.MaxUSD = *nb.MaxUSD
	}
	if nb.MaxTokens != nil {
		b.MaxTokens = *nb.MaxTokens
	}
	if nb.MaxTurns != nil {
		b.MaxTurns = *nb.MaxTurns
	}
	if *b == (egress.BrokerBudget{}) {
		return price, nil
	}
	if f := np.DeclRange.Filename; f != "" {
		b.Where = filepath.Base(f)
	}
	return price, b
}

// upstreamCA is the PEM of sandbox.egress.upstream_ca_file, read from the configuration's directory; "" for none.
func (d *dockerEngine) upstreamCA() (string, error) {
	c := d.run.Config
	if c == nil || c.Sandbox == nil || c.Sandbox.Egress.UpstreamCAFile == "" {
		return "", nil
	}
	path := c.Sandbox.Egress.UpstreamCAFile
	if !filepath.IsAbs(path) {
		path = filepath.Join(c.Dir, path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("sandbox.egress.upstream_ca_file: %w", err)
	}
	return string(data), nil
}

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
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := egress.EndNodeAt(ctx, d.egress.controlAddr, d.egress.control, d.egress.broker[np.Name].user); err != nil {
		d.run.Warn(np.Name, fmt.Sprintf("could not tell the egress proxy that the node ended, so its placeholders stay usable until the proxy stops at the end of the run: %v", err))
	}
}

// brokerDecision records one brokered request from the proxy's decision log; a refusal is also an egress denial.
func (d *dockerEngine) brokerDecision(dec egress.Decision, node string) {
	t := dec.Time
	if t.IsZero() {
		t = time.Now()
	}
	reason := ""
	if !dec.Allowed {
		reason = dec.Reason
		if dec.Refusal != "" {
			reason += ": " + dec.Refusal // the sentence the agent was answered with
		}
		reason = clipText(reason, 600)
	}
	r := ledger.BrokerRequest{Node: node, Method: clipText(dec.Method, 16), Host: clipText(dec.Host, 260),
		Path: clipText(dec.Path, 512), Status: dec.Status, Credential: clipText(dec.Credential, 128), BytesIn: dec.BytesIn,
		BytesOut: dec.BytesOut, DurationMS: dec.DurationMS, Reason: reason, Time: t}
	if m := dec.Meter; m != nil {
		r.ModelCall, r.BudgetCap = m.ModelCall, clipText(m.Cap, 16)
		if u := m.Usage; u != nil {
			r.Metered, r.Model, r.CostSource = true, clipText(u.Model, 200), clipText(u.CostSource, 16)
			r.InputTokens, r.OutputTokens = max(u.InputTokens, 0), max(u.OutputTokens, 0)
			r.CacheReadTokens, r.CacheWriteTokens = max(u.CacheReadTokens, 0), max(u.CacheWriteTokens, 0)
			if u.CostSource == egress.CostReported || u.CostSource == egress.CostEstimated {
				c := max(u.CostUSD, 0)
				r.CostUSD = &c
			}
		}
	}
	d.run.BrokerRequest(r)
}

// controlAddress is where the host reaches the proxy's control endpoint: its address on the proxy network.
func controlAddress(ip net.IP) string {
	return net.JoinHostPort(ip.String(), strconv.Itoa(egress.DefaultPort))
}
