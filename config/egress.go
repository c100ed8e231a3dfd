package config

import (
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"golang.org/x/net/idna"
)

// Egress defaults.
const (
	// DefaultEgressPort is the port of an egress entry written without one: agents reach their hosts over HTTPS.
	DefaultEgressPort = 443
	// DefaultProxyNetwork is the network through which kewplan's own egress proxy reaches out.
	DefaultProxyNetwork = "bridge"
)

// HostPattern is one normalised egress entry: a host name or a "*.suffix" wildcard, and a port.
type HostPattern struct {
	// Host is lowercase ASCII (IDNA names in punycode), without a trailing dot. A wildcard keeps its "*." prefix
	// and matches every name below the suffix, never the suffix itself.
	Host  string
	Port  int       // DefaultEgressPort when the entry named none
	Range hcl.Range // where the entry is written; zero for a runner's built-in endpoint
}

// String is the entry as kewplan shows it: "host" for port 443, "host:port" otherwise.
func (p HostPattern) String() string {
	if p.Port == DefaultEgressPort {
		return p.Host
	}
	return p.Host + ":" + strconv.Itoa(p.Port)
}

// Wildcard reports whether the pattern is a "*.suffix" wildcard.
func (p HostPattern) Wildcard() bool { return strings.HasPrefix(p.Host, "*.") }

// MatchHost reports whether a normalised host name (see NormaliseHost) falls under the pattern's host, ignoring
// the port: a name matches itself, and "*.example.com" matches "a.example.com" and "a.b.example.com", not
// "example.com".
func (p HostPattern) MatchHost(host string) bool {
	if p.Wildcard() {
		suffix := p.Host[1:] // ".example.com"
		return len(host) > len(suffix) && strings.HasSuffix(host, suffix)
	}
	return host == p.Host
}

// Covers reports whether every host and port q allows is also allowed by p (policy checks use it).
func (p HostPattern) Covers(q HostPattern) bool {
	if p.Port != q.Port {
		return false
	}
	if !q.Wildcard() {
		return p.MatchHost(q.Host)
	}
	if !p.Wildcard() {
		return false
	}
	// *.a.example.com is covered by *.example.com and by itself.
	return q.Host == p.Host || strings.HasSuffix(q.Host[1:], p.Host[1:])
}

// NormaliseHost lowercases a host name, strips one trailing dot and converts an internationalised name to its
// punycode form; ok is false when the result is not a valid DNS name of letters, digits and hyphens.
func NormaliseHost(host string) (string, bool) {
	h, msg := normaliseName(host)
	return h, msg == ""
}

// ParseHostPattern reads one egress entry: "host", "*.suffix" or either with ":port". On refusal detail says
// what is wrong and how to fix it, in whole sentences, without the caller's context.
func ParseHostPattern(s string) (HostPattern, string) {
	const fix = " Write a host name such as \"github.com\", a wildcard such as \"*.pythonhosted.org\", or either with a port such as \"proxy.golang.org:8443\"."
	switch {
	case s == "":
		return HostPattern{}, "The entry is empty." + fix
	case strings.TrimSpace(s) != s || strings.ContainsAny(s, " \t\r\n"):
		return HostPattern{}, "The entry holds white space, which no host name does. Remove it." + fix
	case s == "*" || s == "*:*" || strings.HasPrefix(s, "*:"):
		return HostPattern{}, "A bare \"*\" would allow every host, which is what network = \"open\" does; an allowlist names hosts. List the hosts the agent needs, or set network = \"open\" in the sandbox block and accept full egress."
	case strings.Contains(s, "://"):
		scheme, rest, _ := strings.Cut(s, "://")
		host := rest
		if i := strings.IndexAny(host, "/?#"); i >= 0 {
			host = host[:i]
		}
		return HostPattern{}, fmt.Sprintf("The entry has a scheme (%s://); an egress entry names a host and, for a port other than 443, the port. Write %q instead.", scheme, host)
	case strings.Contains(s, "@"):
		return HostPattern{}, "The entry holds user information (\"user@\"); credentials never belong in an allowlist. Write the host name alone." + fix
	}
	if _, _, err := net.ParseCIDR(s); err == nil {
		return HostPattern{}, "The entry is an address range (CIDR). kewplan's proxy allows names, never addresses: an address allowlist cannot say which service answers there. Name the host instead." + fix
	}
	if strings.ContainsAny(s, "/?#") {
		host := s[:strings.IndexAny(s, "/?#")]
		return HostPattern{}, fmt.Sprintf("The entry holds a path; the proxy sees only the host and port of a connection, so a path cannot be allowed alone. Write %q to allow the host.", host)
	}
	if isIPLiteral(s) {
		return HostPattern{}, "The entry is an IP address. kewplan's proxy allows names, never addresses, and refuses connections to IP literals: an address says nothing about which service answers there. Name the host instead." + fix
	}
	host, port := s, DefaultEgressPort
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		host = s[:i]
		p, err := strconv.Atoi(s[i+1:])
		if err != nil || p < 1 || p > 65535 || s[i+1:] != strconv.Itoa(p) {
			return HostPattern{}, fmt.Sprintf("The port %q is not a port number from 1 to 65535.%s", s[i+1:], fix)
		}
		port = p
		if isIPLiteral(host) {
			return HostPattern{}, "The entry is an IP address with a port. kewplan's proxy allows names, never addresses, and refuses connections to IP literals. Name the host instead." + fix
		}
	}
	wildcard := false
	if strings.HasPrefix(host, "*.") {
		wildcard = true
		host = host[2:]
	}
	if strings.Contains(host, "*") {
		return HostPattern{}, "A wildcard is allowed only as the whole first label, as in \"*.pythonhosted.org\"." + fix
	}
	name, msg := normaliseName(host)
	if msg != "" {
		return HostPattern{}, msg + fix
	}
	if wildcard && !strings.Contains(name, ".") {
		return HostPattern{}, fmt.Sprintf("The wildcard \"*.%s\" covers a whole top-level domain, which is not an allowlist. Name the domain, as in \"*.example.%s\".", name, name)
	}
	if wildcard {
		name = "*." + name
	}
	return HostPattern{Host: name, Port: port}, ""
}

// isIPLiteral reports an IPv4 or IPv6 address, bracketed or not, with or without a zone or a port.
func isIPLiteral(s string) bool {
	if strings.HasPrefix(s, "[") {
		return true // only IPv6 literals are written in brackets
	}
	if strings.Count(s, ":") > 1 {
		return true // an IPv6 address (host names hold no colon, and host:port holds one)
	}
	host := s
	if h, _, err := net.SplitHostPort(s); err == nil {
		host = h
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	// Forms inet_aton accepts ("127.1", "0x7f.1", "2130706433") resolve to addresses too: a name whose last
	// label is numeric is not a DNS name.
	labels := strings.Split(strings.TrimSuffix(host, "."), ".")
	last := labels[len(labels)-1]
	if last == "" {
		return false
	}
	if _, err := strconv.ParseUint(last, 0, 64); err == nil {
		return true
	}
	return false
}

// normaliseName lowercases, strips one trailing dot, converts IDNA to punycode and checks the labels. It returns
// a detail sentence when the name is refused.
func normaliseName(host string) (string, string) {
	host = strings.TrimSuffix(host, ".")
	if host == "" {
		return "", "The entry names no host."
	}
	ascii := true
	for i := 0; i < len(host); i++ {
		if host[i] >= 0x80 {
			ascii = false
			break
		}
	}
	if !ascii {
		a, err := idna.Lookup.ToASCII(host)
		if err != nil {
			return "", fmt.Sprintf("The entry %q is not a valid internationalised domain name (%v). Write its ASCII (punycode, \"xn--\") form.", host, err)
		}
		host = a
	}
	host = strings.ToLower(host)
	if len(host) > 253 {
		return "", "The host name is longer than 253 characters, the limit of a DNS name."
	}
	for _, label := range strings.Split(host, ".") {
		switch {
		case label == "":
			return "", fmt.Sprintf("The host name %q has an empty label (two dots in a row, or a leading dot).", host)
		case len(label) > 63:
			return "", fmt.Sprintf("The label %q of the host name is longer than 63 characters, the limit of a DNS label.", label)
		case label[0] == '-' || label[len(label)-1] == '-':
			return "", fmt.Sprintf("The label %q of the host name starts or ends with '-', which no DNS label does.", label)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return "", fmt.Sprintf("The host name %q holds %q; a DNS label holds letters, digits and '-'.", host, string(rune(c)))
			}
		}
	}
	return host, ""
}

// SortHostPatterns sorts patterns by host then port and drops repeats (the first range is kept).
func SortHostPatterns(ps []HostPattern) []HostPattern {
	sort.SliceStable(ps, func(i, j int) bool {
		if ps[i].Host != ps[j].Host {
			return ps[i].Host < ps[j].Host
		}
		return ps[i].Port < ps[j].Port
	})
	out := ps[:0]
	for i, p := range ps {
		if i > 0 && p.Host == out[len(out)-1].Host && p.Port == out[len(out)-1].Port {
			continue
		}
		out = append(out, p)
	}
	return out
}

// decodeHostPatterns reads a literal list of egress entries, one diagnostic per refused entry, at that entry.
// where names the attribute for the reader ("the allow list of the sandbox's egress block").
func decodeHostPatterns(attr *hcl.Attribute, where string) ([]HostPattern, hcl.Diagnostics) {
	list, ranges, diags := constStringList(attr, where)
	if diags.HasErrors() && list == nil {
		return nil, diags
	}
	out := make([]HostPattern, 0, len(list))
	for i, s := range list {
		p, msg := ParseHostPattern(s)
		if msg != "" {
			diags = append(diags, errorDiag("Invalid egress entry",
				fmt.Sprintf("The entry %q in %s cannot be allowed. %s", printable(s), where, msg), ranges[i]))
			continue
		}
		p.Range = ranges[i]
		out = append(out, p)
	}
	return SortHostPatterns(out), diags
}

// printable keeps a refused entry safe to print on a terminal.
func printable(s string) string {
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return '?'
		}
		return r
	}, s)
}

var egressSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "allow"},
		{Name: "provider_fetch"},
		{Name: "private_hosts"},
		{Name: "proxy_network"},
		{Name: "proxy"},
		{Name: "upstream_ca_file"},
	},
}

var nodeEgressSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "allow"}, {Name: "private_hosts"}, {Name: "provider_fetch"}},
}

// decodeSandboxEgress decodes the sandbox's `egress` block into sb.Egress.
func decodeSandboxEgress(block *hcl.Block, eg *SandboxEgress) hcl.Diagnostics {
	eg.DeclRange = block.DefRange
	const where = "the sandbox's egress block"
	content, diags := bodyContent(block.Body, egressSchema, where)
	if attr, ok := content.Attributes["allow"]; ok {
		list, d := decodeHostPatterns(attr, "the allow list of "+where)
		diags = append(diags, d...)
		eg.Allow = list
		eg.AllowRange = attr.Range
	}
	if attr, ok := content.Attributes["private_hosts"]; ok {
		list, d := decodeHostPatterns(attr, "the private_hosts list of "+where)
		diags = append(diags, d...)
		eg.PrivateHosts = list
		eg.PrivateHostsRange = attr.Range
		diags = append(diags, checkPrivateHosts(list, where, "the allow list of the sandbox's egress block", eg.Allow)...)
	}
	if attr, ok := content.Attributes["provider_fetch"]; ok {
		eg.ProviderFetch, eg.ProviderFetchRanges, diags = decodeProviderFetch(attr, where, diags)
		eg.ProviderFetchRange = attr.Range
	}
	if attr, ok := content.Attributes["proxy_network"]; ok {
		s, d := constString(attr, where)
		diags = append(diags, d...)
		if !d.HasErrors() {
			if !networkNamePattern.MatchString(s) {
				diags = append(diags, errorDiag("Invalid network name",
					fmt.Sprintf("The proxy_network %q is not a Docker network name. A network name starts with a letter or digit and holds letters, digits, '_', '.' and '-'; the default is %q, Docker's default bridge, through which the proxy reaches the internet.", printable(s), DefaultProxyNetwork),
					attr.Expr.Range()))
			} else {
				eg.ProxyNetwork = s
			}
			eg.ProxyNetworkRange = attr.Expr.Range()
		}
	}
	if attr, ok := content.Attributes["proxy"]; ok {
		s, d := constString(attr, where)
		diags = append(diags, d...)
		if !d.HasErrors() {
			if msg := checkProxyURL(s); msg != "" {
				diags = append(diags, errorDiag("Invalid proxy address", msg, attr.Expr.Range()))
			} else {
				eg.Proxy = s
			}
			eg.ProxyRange = attr.Expr.Range()
		}
	}
	if attr, ok := content.Attributes["upstream_ca_file"]; ok {
		s, d := constString(attr, where)
		diags = append(diags, d...)
		if !d.HasErrors() {
			if s == "" || strings.ContainsRune(s, 0) {
				diags = append(diags, errorDiag("Invalid upstream CA file",
					"The upstream_ca_file of the sandbox's egress block is empty. Name a PEM file of certificate authorities, relative to the configuration's directory, such as \"ca.pem\", or remove the argument to trust only the system's roots.",
					attr.Expr.Range()))
			} else {
				eg.UpstreamCAFile = s
			}
			eg.UpstreamCAFileRange = attr.Expr.Range()
		}
	}
	return diags
}

// checkProxyURL accepts "http://host:port" (an existing forward proxy) and returns a detail sentence otherwise.
// Credentials are refused in it: the URL is shown in the plan.
func checkProxyURL(s string) string {
	const example = " Write the proxy's address as \"http://host:port\", for example \"http://squid.corp:3128\", or remove the argument to use kewplan's own proxy."
	rest, ok := strings.CutPrefix(s, "http://")
	if !ok {
		return fmt.Sprintf("The proxy %q is not an http:// address; agents speak to a forward proxy in plain HTTP (CONNECT).%s", printable(s), example)
	}
	rest = strings.TrimSuffix(rest, "/")
	if strings.Contains(rest, "@") {
		return "The proxy address holds user information (\"user:password@\"). The plan shows this address, so it must not carry a credential." + example
	}
	if strings.ContainsAny(rest, "/?# \t\r\n") {
		return fmt.Sprintf("The proxy %q holds a path or white space.%s", printable(s), example)
	}
	host, port, err := net.SplitHostPort(rest)
	if err != nil || host == "" {
		return fmt.Sprintf("The proxy %q names no port.%s", printable(s), example)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Sprintf("The proxy's port %q is not a port number from 1 to 65535.%s", printable(port), example)
	}
	return ""
}

// decodeNodeEgress decodes a node's `egress` block.
func decodeNodeEgress(block *hcl.Block, node string) (*NodeEgress, hcl.Diagnostics) {
	where := fmt.Sprintf("the egress block of node %q", node)
	ne := &NodeEgress{DeclRange: block.DefRange}
	content, diags := bodyContent(block.Body, nodeEgressSchema, where)
	if attr, ok := content.Attributes["allow"]; ok {
		list, d := decodeHostPatterns(attr, "the allow list of "+where)
		diags = append(diags, d...)
		ne.Allow = list
		ne.AllowRange = attr.Range
	}
	if attr, ok := content.Attributes["private_hosts"]; ok {
		list, d := decodeHostPatterns(attr, "the private_hosts list of "+where)
		diags = append(diags, d...)
		ne.PrivateHosts = list
		ne.PrivateHostsRange = attr.Range
	}
	if attr, ok := content.Attributes["provider_fetch"]; ok {
		ne.ProviderFetch, ne.ProviderFetchRanges, diags = decodeProviderFetch(attr, where, diags)
		ne.ProviderFetchRange = attr.Range
	}
	return ne, diags
}

// checkNodePrivateHosts checks that each node's private hosts are allowed, by the node's own allow list or the
// sandbox's (the sandbox may be in another file, so this runs once every file is decoded).
func (c *Config) checkNodePrivateHosts() hcl.Diagnostics {
	var sandbox []HostPattern
	if c.Sandbox != nil {
		sandbox = c.Sandbox.Egress.Allow
	}
	var diags hcl.Diagnostics
	for _, name := range slices.Sorted(maps.Keys(c.Nodes)) {
		ne := c.Nodes[name].Egress
		if ne == nil || len(ne.PrivateHosts) == 0 {
			continue
		}
		where := fmt.Sprintf("the egress block of node %q", name)
		allowed := append(append([]HostPattern(nil), ne.Allow...), sandbox...)
		diags = append(diags, checkPrivateHosts(ne.PrivateHosts, where, "its allow list or the sandbox's", allowed)...)
	}
	return diags
}

// checkPrivateHosts refuses a private host that no allow entry lets through: private_hosts widens how a host may
// resolve, never which hosts a node reaches.
func checkPrivateHosts(private []HostPattern, where, lists string, allow []HostPattern) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, q := range private {
		if privateHostAllowed(q, allow) {
			continue
		}
		diags = append(diags, errorDiag("Private host not allowed",
			fmt.Sprintf("The private host %q in %s is not in %s. private_hosts only lets an allowed host resolve to a private address; it allows no host by itself. Add %q to the allow list beside it, or remove it from private_hosts.",
				q.String(), where, lists, q.String()), q.Range))
	}
	return diags
}

// privateHostAllowed reports whether an allow entry lets q's host through (on q's port when q names one).
func privateHostAllowed(q HostPattern, allow []HostPattern) bool {
	for _, p := range allow {
		if p.Host != q.Host && (q.Wildcard() || !p.MatchHost(q.Host)) {
			continue
		}
		if q.Port == DefaultEgressPort || p.Port == q.Port {
			return true
		}
	}
	return false
}

// Provider-fetch features: what a brokered request can make the model provider's own servers fetch or connect
// to on the agent's behalf. The proxy's allowlist never sees those connections (they leave from the provider),
// so kewplan's broker refuses every request that uses one unless the node opts in to it (provider_fetch).
const (
	// ProviderFetchWebSearch: the provider searches the web (Anthropic's web_search tool; OpenRouter's web
	// plugin, ":online" models, web_search_options and its openrouter:web_search tool).
	ProviderFetchWebSearch = "web_search"
	// ProviderFetchWebFetch: the provider fetches a URL the model names (Anthropic's web_fetch tool,
	// OpenRouter's openrouter:web_fetch tool).
	ProviderFetchWebFetch = "web_fetch"
	// ProviderFetchCodeExecution: the provider runs code in a container of its own (Anthropic's code execution
	// tool, skills and containers).
	ProviderFetchCodeExecution = "code_execution"
	// ProviderFetchMCPServers: the provider connects to MCP servers the request names (Anthropic's MCP
	// connector: mcp_servers and mcp_toolset tools).
	ProviderFetchMCPServers = "mcp_servers"
	// ProviderFetchURLSources: the provider downloads an image or document from a URL in the messages (a "url"
	// source; an OpenAI-style image_url or file that is not a data: URL).
	ProviderFetchURLSources = "url_sources"
)

// ProviderFetchFeatures are every provider-fetch feature, sorted.
var ProviderFetchFeatures = []string{ProviderFetchCodeExecution, ProviderFetchMCPServers, ProviderFetchURLSources,
	ProviderFetchWebFetch, ProviderFetchWebSearch}

// decodeProviderFetch reads a literal provider_fetch list: each entry one of ProviderFetchFeatures, a repeat
// refused at the repeat.
func decodeProviderFetch(attr *hcl.Attribute, where string, diags hcl.Diagnostics) ([]string, []hcl.Range, hcl.Diagnostics) {
	list, ranges, d := constStringList(attr, where)
	diags = append(diags, d...)
	var out []string
	var outRanges []hcl.Range
	for i, s := range list {
		switch {
		case !slices.Contains(ProviderFetchFeatures, s):
			diags = append(diags, errorDiag("Unknown provider-fetch feature",
				fmt.Sprintf("The entry %q in the provider_fetch list of %s is not a feature kewplan's broker knows.%s provider_fetch names what a brokered request may make the model provider fetch on the agent's behalf, one of %s; every other such request is refused.",
					printable(s), where, didYouMean(s, ProviderFetchFeatures), quotedList(ProviderFetchFeatures)), ranges[i]))
		case slices.Contains(out, s):
			diags = append(diags, errorDiag("Duplicate provider-fetch feature",
				fmt.Sprintf("The feature %q is listed twice in the provider_fetch list of %s. Remove the repeat.", s, where), ranges[i]))
		default:
			out = append(out, s)
			outRanges = append(outRanges, ranges[i])
		}
	}
	if out == nil && !diags.HasErrors() {
		out = []string{} // written and empty: no feature, as when not written
	}
	return out, outRanges, diags
}
