package egress

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/kewplan/kewplan/config"
)

// Protocols of a brokered endpoint: they choose the shape of the broker's refusals, so that the agent's SDK
// reads them as its API's own errors.
const (
	// BrokerAPIAnthropic answers {"type":"error","error":{"type":...,"message":...}} (Anthropic's error shape).
	BrokerAPIAnthropic = "anthropic"
	// BrokerAPIOpenAI answers {"error":{"message":...,"type":...,"code":<status>}}: what OpenAI-compatible SDKs
	// (OpenRouter's, OpenAI's) read.
	BrokerAPIOpenAI = "openai"
)

// PlaceholderPrefix starts every placeholder NewPlaceholder mints, so that one is recognisable in a log or a
// transcript as kewplan's and never mistaken for (or by) a provider's key scanner.
const PlaceholderPrefix = "kewplan-placeholder-"

// BrokerConfig is one node's brokered credentials: the agent holds only placeholders and calls the proxy's
// broker endpoint as its base URL (BrokerBaseURL); the proxy checks the placeholder, replaces every credential
// header with the real one and forwards over verified TLS to the node's runner endpoint, and nowhere else.
type BrokerConfig struct {
	// API is the endpoint's protocol, BrokerAPIAnthropic or BrokerAPIOpenAI; it shapes refusals.
	API string `json:"api"`
	// Endpoints are the runner's API hosts the node may reach through the broker: "host" (port 443) or
	// "host:port". No wildcards: the broker dials exactly what is named. Always HTTPS.
	Endpoints []string `json:"endpoints"`
	// Credentials are the runner's credentials, one per environment variable name. A request presenting a
	// credential's placeholder is forwarded with that credential's real value and no other.
	Credentials []BrokerCredential `json:"credentials"`
	// StripHeaders are extra request header names that may carry a credential (the runner declares them); they
	// are removed, as are x-api-key, Authorization, Proxy-Authorization, Cookie and every credential's header.
	StripHeaders []string `json:"strip_headers,omitempty"`
	// EndsAt, when set, is when the node's placeholders stop being accepted (a backstop to the control
	// endpoint); a brokered request still open then is cut.
	EndsAt *time.Time `json:"ends_at,omitempty"`
	// Price is the node's model's price, for the cost of an answer whose provider reports tokens but no cost;
	// nil when the plan has none (then such a cost is unknown, never 0).
	Price *BrokerPrice `json:"price,omitempty"`
	// Budget is the node's caps, judged on what the broker metered; nil for none.
	Budget *BrokerBudget `json:"budget,omitempty"`
	// ProviderFetch are the provider-fetch features (config.ProviderFetchFeatures) the node's requests may use:
	// a request whose body or anthropic-beta header would make the provider fetch on the agent's behalf with
	// any other is refused (provider_fetch.go). Empty: none.
	ProviderFetch []string `json:"provider_fetch,omitempty"`
	// Paths are the methods and paths the broker forwards (the runner's API: runners.BrokeredAPIPaths, under
	// the base URL's path); every other request is refused. At least one.
	Paths []BrokerPath `json:"paths"`
	// MaxOutputTokens is the most output the node's model gives one call (the model's maximum): a model call's
	// reservation is its max_tokens bounded by it, or it when the call names none. 0: DefaultMaxOutputTokens.
	MaxOutputTokens int64 `json:"max_output_tokens,omitempty"`
}

// BrokerCredential is one credential of a brokered node.
type BrokerCredential struct {
	// Name is the environment variable the runner reads it from (ANTHROPIC_API_KEY, CLAUDE_CODE_OAUTH_TOKEN,
	// OPENROUTER_API_KEY): the agent's container holds the placeholder under this name.
	Name string `json:"name"`
	// Placeholder is what the agent holds instead (NewPlaceholder: per node and per run); at least 32
	// characters, unique in the configuration.
	Placeholder string `json:"placeholder"`
	// Value is the real credential. It exists only in the proxy's memory: the configuration arrives on stdin.
	Value string `json:"value,omitempty"`
	// ValueEnv, instead of Value, names the proxy process's environment variable that holds it: on Kubernetes the
	// proxy's pod gets it from the credentials Secret, and the configuration (in a Secret too) holds none. A
	// credential whose variable is unset or empty is dropped when the configuration is loaded, and its
	// placeholder refused like any unknown one.
	ValueEnv string `json:"value_env,omitempty"`
	// Header carries Value upstream: "x-api-key" (Anthropic API keys) or "Authorization".
	Header string `json:"header"`
	// Scheme, when set, prefixes Value in Header: "Bearer" gives "Authorization: Bearer <value>".
	Scheme string `json:"scheme,omitempty"`
}

// envNamePattern is what a credential name may be (the container contract's rule for forwarded names).
var envNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// NewPlaceholder mints a placeholder: PlaceholderPrefix and 32 random bytes, hex. Apply mints one per node, per
// credential and per run, so that a placeholder seen anywhere names its node and run and is worthless after.
func NewPlaceholder() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("broker placeholder: %w", err)
	}
	return PlaceholderPrefix + hex.EncodeToString(b), nil
}

// BrokerBaseURL is the value of a brokered agent's base-URL variable (runners.BrokeredBaseURL names the variable
// and the path): http://<proxy host>:<port>/broker/<node>/<identity>/<endpoint><path>, where identity is
// BrokerIdentity(node, the node's proxy secret), e.g.
// http://172.18.0.2:3128/broker/fix/<32 hex digits>/api.anthropic.com for Claude Code's ANTHROPIC_BASE_URL, or
// http://172.18.0.2:3128/broker/fix/<32 hex digits>/openrouter.ai/api/v1 for OpenRouter. The identity binds
// the URL to its node; the secret it derives from is not in it. endpoint is one of the node's
// BrokerConfig.Endpoints as written; path is "" or starts with "/".
func BrokerBaseURL(proxyHost string, port int, node, proxySecret, endpoint, path string) string {
	u := url.URL{Scheme: "http", Host: net.JoinHostPort(proxyHost, strconv.Itoa(port)),
		Path: BrokerPathPrefix + node + "/" + BrokerIdentity(node, proxySecret) + "/" + endpoint + path}
	return u.String()
}

// brokerEndpoint is a checked endpoint: its canonical name and port.
type brokerEndpoint struct {
	host string
	port int
}

func (e brokerEndpoint) hostPort() string { return net.JoinHostPort(e.host, strconv.Itoa(e.port)) }

// parseBrokerEndpoint reads "host" or "host:port" into a canonical endpoint, or says why not.
func parseBrokerEndpoint(s string) (brokerEndpoint, string) {
	host, port := s, 443
	if h, p, err := net.SplitHostPort(s); err == nil {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 || p != strconv.Itoa(n) {
			return brokerEndpoint{}, "the port is not a number from 1 to 65535"
		}
		host, port = h, n
	}
	if strings.Contains(host, "*") {
		return brokerEndpoint{}, "a brokered endpoint names one host, not a wildcard"
	}
	name, reason := canonicalName(host)
	if reason != "" || name != strings.ToLower(host) {
		return brokerEndpoint{}, "not a host name (an IP address, or a name that does not normalise to itself)"
	}
	return brokerEndpoint{host: name, port: port}, ""
}

// checkBrokers checks the control secret, the upstream CA and every node's broker section. Placeholders must be
// unique across the whole configuration: the broker tells whose placeholder a request carries.
func checkBrokers(cfg *Config) error {
	if cfg.ControlSecret != "" && len(cfg.ControlSecret) < 32 {
		return errors.New("the control secret is shorter than 32 characters; use NewSecret")
	}
	if cfg.UpstreamCAPEM != "" {
		if _, err := upstreamCAs(cfg.UpstreamCAPEM); err != nil {
			return err
		}
	}
	placeholders := map[string]string{}
	for _, n := range cfg.Nodes {
		b := n.Broker
		if b == nil {
			continue
		}
		fail := func(format string, a ...any) error {
			return fmt.Errorf("node %q: broker: %s", n.Name, fmt.Sprintf(format, a...))
		}
		if b.API != BrokerAPIAnthropic && b.API != BrokerAPIOpenAI {
			return fail("api %q is neither %q nor %q", b.API, BrokerAPIAnthropic, BrokerAPIOpenAI)
		}
		if len(b.Endpoints) == 0 {
			return fail("no endpoints")
		}
		for _, e := range b.Endpoints {
			if _, why := parseBrokerEndpoint(e); why != "" {
				return fail("endpoint %q: %s", e, why)
			}
		}
		if len(b.Credentials) == 0 {
			return fail("no credentials")
		}
		if len(b.Paths) == 0 {
			return fail("no paths: the broker forwards only the methods and paths listed")
		}
		for _, p := range b.Paths {
			if why := checkBrokerPath(p); why != "" {
				return fail("%s", why)
			}
		}
		if b.MaxOutputTokens < 0 || b.Budget != nil && b.Budget.Attempts < 0 {
			return fail("max_output_tokens and budget attempts are at least 0")
		}
		names := map[string]bool{}
		for _, c := range b.Credentials {
			switch {
			case !envNamePattern.MatchString(c.Name):
				return fail("credential name %q is not an environment variable name", c.Name)
			case names[c.Name]:
				return fail("credential %s is listed twice", c.Name)
			case len(c.Placeholder) < 32:
				return fail("credential %s: the placeholder is shorter than 32 characters; use NewPlaceholder", c.Name)
			case !httpguts.ValidHeaderFieldValue(c.Placeholder) || strings.ContainsAny(c.Placeholder, " \t"):
				return fail("credential %s: the placeholder is not a header value without spaces", c.Name)
			case placeholders[c.Placeholder] != "":
				return fail("credential %s: its placeholder is also %s's; placeholders are unique", c.Name, placeholders[c.Placeholder])
			case c.Value == "" || !httpguts.ValidHeaderFieldValue(c.Value) || strings.TrimSpace(c.Value) != c.Value:
				return fail("credential %s: the value is empty or not a valid header value", c.Name)
			case c.Value == c.Placeholder:
				return fail("credential %s: the placeholder is the real value", c.Name)
			case !httpguts.ValidHeaderFieldName(c.Header):
				return fail("credential %s: header %q is not a header name", c.Name, c.Header)
			case c.Scheme != "" && !httpguts.ValidHeaderFieldName(c.Scheme):
				return fail("credential %s: scheme %q is not a token", c.Name, c.Scheme)
			}
			names[c.Name] = true
			placeholders[c.Placeholder] = fmt.Sprintf("node %q's %s", n.Name, c.Name)
		}
		if p := b.Price; p != nil && !(finiteNonNegative(p.Input) && finiteNonNegative(p.Output) && finiteNonNegative(p.CacheRead) && finiteNonNegative(p.CacheWrite)) {
			return fail("price: every figure is a finite number of at least 0")
		}
		if g := b.Budget; g != nil && (!finiteNonNegative(g.MaxUSD) || g.MaxTokens < 0 || g.MaxTurns < 0) {
			return fail("budget: every cap is a finite number of at least 0 (0: no cap)")
		}
		for _, f := range b.ProviderFetch {
			if !slices.Contains(config.ProviderFetchFeatures, f) {
				return fail("provider_fetch %q is not one of %s", f, strings.Join(config.ProviderFetchFeatures, ", "))
			}
		}
		for _, h := range b.StripHeaders {
			if !httpguts.ValidHeaderFieldName(h) {
				return fail("strip header %q is not a header name", h)
			}
		}
	}
	return nil
}

func finiteNonNegative(f float64) bool { return f >= 0 && !math.IsInf(f, 1) }

// upstreamCAs parses UpstreamCAPEM: every block must be a certificate, and there must be one.
func upstreamCAs(pemText string) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	rest := []byte(pemText)
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("upstream_ca_pem: a %q block is not a certificate", block.Type)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("upstream_ca_pem: %w", err)
		}
		out = append(out, c)
	}
	if len(out) == 0 || strings.TrimSpace(string(rest)) != "" {
		return nil, errors.New("upstream_ca_pem: not PEM certificates")
	}
	return out, nil
}
