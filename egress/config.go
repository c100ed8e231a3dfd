package egress

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"strconv"

	"github.com/kewplan/kewplan/config"
)

// DefaultListen is where the proxy listens inside its container.
const DefaultListen = "0.0.0.0:3128"

// DefaultPort is the port of DefaultListen; agents' proxy URLs name it.
const DefaultPort = 3128

// maxConfigBytes bounds a configuration file: one line per node, a few hundred bytes each.
const maxConfigBytes = 16 << 20

// Config is the proxy's configuration file (JSON). Apply writes it (to the proxy's stdin, so the node secrets
// never touch a disk or `docker inspect`); `kewplan egress-proxy --config FILE|-` reads it.
//
//	{
//	  "listen": "0.0.0.0:3128",
//	  "allow_private_addresses": false,
//	  "control_secret": "<64 hex>",
//	  "upstream_ca_pem": "",
//	  "nodes": [
//	    {"name": "fix", "secret": "<64 hex>", "allow": ["github.com", "pypi.org:8443"],
//	     "broker": {"api": "anthropic", "endpoints": ["api.anthropic.com"], "ends_at": "2026-12-01T10:00:00Z",
//	       "credentials": [{"name": "ANTHROPIC_API_KEY", "placeholder": "kewplan-placeholder-<64 hex>",
//	         "value": "sk-ant-...", "header": "x-api-key"}]}}
//	  ]
//	}
type Config struct {
	// Listen is the address the proxy listens on; DefaultListen when empty.
	Listen string `json:"listen"`
	// Nodes are the agents the proxy serves, each with its own secret and allowlist.
	Nodes []NodeConfig `json:"nodes"`
	// AllowPrivateAddresses lets an allowed name resolve to private (RFC 1918, ULA) and CGNAT addresses, for a
	// model gateway or a test stub inside the operator's network. Loopback, link-local (cloud metadata),
	// multicast and unspecified addresses are refused regardless.
	AllowPrivateAddresses bool `json:"allow_private_addresses"`
	// ControlSecret authenticates apply on the proxy's control endpoint (ControlEndNodePath: the apply tells the
	// proxy that a node ended). Empty disables the endpoint; otherwise at least 32 characters (NewSecret).
	ControlSecret string `json:"control_secret,omitempty"`
	// UpstreamCAPEM is PEM text of certificates trusted, in addition to the system roots, for brokered requests
	// only (a model gateway with its own CA; the tests' stand-in). The forward proxy never terminates TLS.
	UpstreamCAPEM string `json:"upstream_ca_pem,omitempty"`
	// SelfAddresses are more "ip:port" addresses that name this proxy in a request's absolute URL (on Kubernetes,
	// the cluster IP and port of the Service in front of it): an agent that sends its base-URL requests through
	// HTTP_PROXY names the Service, not the address the proxy listens on.
	SelfAddresses []string `json:"self_addresses,omitempty"`
	// StateFile is where the broker keeps its meters, attempts and ended nodes (state.go), in a directory only the
	// proxy writes; a proxy started again with the same configuration goes on from it. Empty keeps them in memory
	// only.
	StateFile string `json:"state_file,omitempty"`
}

// NodeConfig is one agent's credentials and allowlist.
type NodeConfig struct {
	Name   string `json:"name"`
	Secret string `json:"secret"`
	// Allow are egress entries as the configuration writes them: "host", "*.suffix", or either with ":port".
	// A name is allowed on port 443 only unless an entry names another port; plain HTTP is forwarded only to a
	// host:port entry whose port is not 443.
	Allow []string `json:"allow"`
	// PrivateHosts are the entries of Allow whose names may resolve to private ranges (RFC 1918, ULA, CGNAT):
	// an internal mirror or git server the plan names one by one. Loopback, link-local, metadata and unspecified
	// addresses are refused for them too.
	PrivateHosts []string `json:"private_hosts,omitempty"`
	// Broker, when set, lets the node call its runner's model API through the proxy's credential broker with a
	// placeholder instead of the real key (see BrokerConfig).
	Broker *BrokerConfig `json:"broker,omitempty"`
}

// nodeNamePattern is what a node name may be in the proxy's configuration: kewplan's node names, which are
// also the user part of the agent's proxy URL.
var nodeNamePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,62}$`)

// LoadConfig reads a configuration file; "-" reads standard input (stdin).
func LoadConfig(path string, stdin io.Reader) (*Config, error) {
	var r io.Reader
	if path == "-" {
		r = stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("egress proxy configuration: %w", err)
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("egress proxy configuration %s: %w", path, err)
	}
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("egress proxy configuration %s: larger than %d MiB", path, maxConfigBytes>>20)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("egress proxy configuration %s: %w", path, err)
	}
	return cfg, nil
}

// resolveCredentialEnv reads each broker credential named by ValueEnv from the proxy's environment, dropping one
// whose variable is unset or empty (the Secret the variable comes from lacks the key: the node's other credential
// names may still be there).
func (cfg *Config) resolveCredentialEnv(getenv func(string) string) error {
	for i := range cfg.Nodes {
		b := cfg.Nodes[i].Broker
		if b == nil {
			continue
		}
		kept := b.Credentials[:0]
		for _, c := range b.Credentials {
			if c.ValueEnv == "" {
				kept = append(kept, c)
				continue
			}
			if c.Value != "" || !envNamePattern.MatchString(c.ValueEnv) {
				return fmt.Errorf("node %q: credential %s: value_env must be an environment variable name, and the only source of the value", cfg.Nodes[i].Name, c.Name)
			}
			if c.Value = getenv(c.ValueEnv); c.Value != "" {
				c.ValueEnv = ""
				kept = append(kept, c)
			}
		}
		b.Credentials = kept
	}
	return nil
}

// ParseConfig decodes and checks a configuration. Unknown keys are refused: a misspelt key would otherwise
// silently mean its default.
func ParseConfig(data []byte) (*Config, error) {
	var cfg Config
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("not a valid configuration: %w", err)
	}
	if dec.More() {
		return nil, errors.New("not a valid configuration: more than one JSON value")
	}
	if err := cfg.resolveCredentialEnv(os.Getenv); err != nil {
		return nil, err
	}
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	for _, a := range cfg.SelfAddresses {
		if _, err := netip.ParseAddrPort(a); err != nil {
			return nil, fmt.Errorf("self address %q is not ip:port: %w", a, err)
		}
	}
	if _, _, err := net.SplitHostPort(cfg.Listen); err != nil {
		return nil, fmt.Errorf("listen %q is not host:port: %w", cfg.Listen, err)
	}
	seen := map[string]bool{}
	for i, n := range cfg.Nodes {
		switch {
		case !nodeNamePattern.MatchString(n.Name):
			return nil, fmt.Errorf("node %d: name %q is not a node name (a letter, then letters, digits, '_' and '-')", i+1, n.Name)
		case seen[n.Name]:
			return nil, fmt.Errorf("node %q is listed twice", n.Name)
		case len(n.Secret) < 32:
			return nil, fmt.Errorf("node %q: the secret is shorter than 32 characters; use NewSecret", n.Name)
		}
		seen[n.Name] = true
		for _, a := range n.Allow {
			if _, why := config.ParseHostPattern(a); why != "" {
				return nil, fmt.Errorf("node %q: entry %q: %s", n.Name, a, why)
			}
		}
		for _, a := range n.PrivateHosts {
			if _, why := config.ParseHostPattern(a); why != "" {
				return nil, fmt.Errorf("node %q: private host %q: %s", n.Name, a, why)
			}
		}
	}
	if err := checkBrokers(&cfg); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// NewSecret returns a fresh per-node proxy secret: 32 random bytes, hex.
func NewSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("proxy secret: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// ProxyURL is the address an agent's proxy variables hold: http://<node>:<secret>@<host>:<port>. It carries the
// node's secret: apply passes it to the container by value through the Engine API only, never in an argv or a log.
func ProxyURL(host string, port int, node, secret string) string {
	u := url.URL{Scheme: "http", User: url.UserPassword(node, secret), Host: net.JoinHostPort(host, strconv.Itoa(port))}
	return u.String()
}

// ContainerEnv is the value of each of planner.ProxyVariables for one agent container.
func ContainerEnv(proxyURL string) map[string]string {
	return map[string]string{"HTTPS_PROXY": proxyURL, "HTTP_PROXY": proxyURL, "https_proxy": proxyURL, "http_proxy": proxyURL}
}
