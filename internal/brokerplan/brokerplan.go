// Package brokerplan turns a brokered node's plan into the egress proxy's broker section, for both engines: the
// API its runner speaks, its endpoints, the price and caps the proxy meters it by, and one placeholder per
// credential, minted for the run. Where the real value comes from is the engine's: kewplan's environment on
// Docker, the proxy pod's own environment (from the credentials Secret) on Kubernetes.
package brokerplan

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/egress"
	"github.com/kewplan/kewplan/planner"
	"github.com/kewplan/kewplan/runners"
)

// Target is where a brokered node's base URL points within the broker: the endpoint and the path after it.
type Target struct {
	Endpoint, Path string
}

// Source gives a credential's real value (value) or the proxy's environment variable that holds it (env); ok is
// false for a credential the node is not to get (unset in kewplan's environment, say).
type Source func(name string) (value, env string, ok bool)

// Brokered says whether the node's credentials are brokered.
func Brokered(np *planner.NodePlan) bool {
	return np.CredentialMode == config.CredentialsBrokered && len(np.BrokeredEndpoints) > 0
}

// Config builds the node's broker section: credentials from src, placeholders from mint (name -> placeholder in
// the result); nil for a node whose credentials are forwarded.
func Config(np *planner.NodePlan, src Source, mint func(name string) (string, error)) (*egress.BrokerConfig, Target, map[string]string, error) {
	if !Brokered(np) {
		return nil, Target{}, nil, nil
	}
	api, endpoint, path := runners.BrokeredRoute(np.Runner, np.Protocol, np.BrokeredEndpoints)
	t := Target{Endpoint: endpoint, Path: path}
	cfg := &egress.BrokerConfig{API: api, Endpoints: append([]string(nil), np.BrokeredEndpoints...),
		MaxOutputTokens: runners.MaxOutputTokens(np.Model), ProviderFetch: append([]string(nil), np.ProviderFetch...)}
	for _, p := range np.BrokeredPaths {
		cfg.Paths = append(cfg.Paths, egress.BrokerPath{Method: p.Method, Path: p.Path, ModelCall: p.ModelCall})
	}
	cfg.Price, cfg.Budget = Budget(np)
	placeholders := map[string]string{}
	for _, name := range np.Credentials {
		value, env, ok := src(name)
		if !ok {
			continue
		}
		ph, err := mint(name)
		if err != nil {
			return nil, Target{}, nil, err
		}
		header, scheme := "Authorization", "Bearer"
		if h, ok := runners.CredentialHeaderOf(name); ok {
			header, scheme = h.Header, h.Scheme
		} else if api == egress.BrokerAPIAnthropic {
			header, scheme = "x-api-key", ""
		}
		cfg.Credentials = append(cfg.Credentials, egress.BrokerCredential{Name: name, Placeholder: ph, Value: value, ValueEnv: env, Header: header, Scheme: scheme})
		placeholders[name] = ph
	}
	return cfg, t, placeholders, nil
}

// Budget is what the proxy needs to meter and cap a brokered node: its model's price (nil: none) and its caps,
// with the file that declares the node for the refusal's advice (a node budget block there overrides the
// sandbox's attribute by attribute). The apply-wide max_usd is apply's to enforce: it stops every node.
func Budget(np *planner.NodePlan) (*egress.BrokerPrice, *egress.BrokerBudget) {
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
	b.Attempts = int64(max(np.Retry.Attempts, 1))
	if f := np.DeclRange.Filename; f != "" {
		b.Where = filepath.Base(f)
	}
	return price, b
}

// UpstreamCA is the PEM of the configuration's sandbox.egress.upstream_ca_file, read from its directory: the
// authorities the proxy trusts beside the system's roots for brokered requests. "" for none.
func UpstreamCA(c *config.Config) (string, error) {
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
