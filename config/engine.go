package config

import (
	"fmt"
	"regexp"

	"github.com/hashicorp/hcl/v2"
)

// Engine names accepted as the label of an `engine` block.
const (
	EngineDocker     = "docker"
	EngineKubernetes = "kubernetes"
)

// Defaults of the kubernetes engine block.
const (
	DefaultProxyService     = "kewplan-egress-proxy"
	DefaultProxyPort        = 3128
	DefaultTTLAfterFinished = 3600
	DefaultScratchSize      = "512Mi"
	DefaultHomeSize         = "2Gi"
)

// DefaultProxySelector is the pod selector of kewplan's own egress proxy Deployment.
var DefaultProxySelector = map[string]string{"app.kubernetes.io/name": DefaultProxyService}

// Engine is an `engine "<name>"` block. Exactly one of its kind-specific fields is set.
type Engine struct {
	Name       string
	Kubernetes *KubernetesEngine // set when Name is EngineKubernetes
	DeclRange  hcl.Range
}

// KubernetesEngine is the body of `engine "kubernetes"`: where the plan's Jobs go and which Secrets they read.
// Secret values never pass through kewplan; only their names are configured.
type KubernetesEngine struct {
	Context           string // kubeconfig context; "" means the current one (KUBECONFIG honoured)
	Namespace         string
	RuntimeClass      string // "" when unset
	GitSecret         string // Secret with the clone/push credential (key "token"), mounted only by the git steps
	CredentialsSecret string // Secret whose keys are the runner credential names
	// GitImage runs the clone and push steps; "" means each node's agent image (the contract's image has git).
	GitImage string
	// ProxyImage is kewplan's egress proxy image (`make proxy-image` builds it; the operator pushes it to a registry
	// the cluster pulls from). When set, the rendered objects include the proxy's Deployment, Service, configuration
	// and NetworkPolicy, named per run (proxy_selector, proxy_namespace and proxy_service cannot be set with it);
	// when "", the operator runs a proxy behind ProxyService.
	ProxyImage string
	// The egress proxy the NetworkPolicy lets the agent reach (kewplan's Deployment by default, or the operator's).
	ProxySelector  map[string]string
	ProxyNamespace string // "" means Namespace
	ProxyService   string // Service name the agent's HTTPS_PROXY points at
	ProxyPort      int64
	// TTLAfterFinished is the Job's ttlSecondsAfterFinished.
	TTLAfterFinished int64
	ScratchSize      string // sizeLimit of the memory emptyDir at /tmp
	HomeSize         string // sizeLimit of the memory emptyDir at /home/agent
	Ranges           map[string]hcl.Range
	DeclRange        hcl.Range
}

var kubernetesEngineSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "context"},
		{Name: "namespace", Required: true},
		{Name: "runtime_class"},
		{Name: "git_secret", Required: true},
		{Name: "credentials_secret", Required: true},
		{Name: "git_image"},
		{Name: "proxy_image"},
		{Name: "proxy_selector"},
		{Name: "proxy_namespace"},
		{Name: "proxy_service"},
		{Name: "proxy_port"},
		{Name: "ttl_seconds_after_finished"},
		{Name: "tmp_size"},
		{Name: "home_size"},
	},
}

var dockerEngineSchema = &hcl.BodySchema{}

// dns1123Label is Kubernetes' rule for namespace and Service names; dns1123Subdomain for most object names.
var (
	dns1123Label     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dns1123Subdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	labelKeyPattern  = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)
	labelValPattern  = regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$`)
	quantityPattern  = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|k|M|G|T)?$`)
	contextPattern   = regexp.MustCompile(`^[^\x00-\x1f\x7f]+$`)
)

func decodeEngineBlock(block *hcl.Block) (*Engine, hcl.Diagnostics) {
	name := block.Labels[0]
	e := &Engine{Name: name, DeclRange: block.DefRange}
	switch name {
	case EngineDocker:
		_, diags := bodyContent(block.Body, dockerEngineSchema, `the engine "docker" block`)
		return e, diags
	case EngineKubernetes:
		k, diags := decodeKubernetesEngine(block)
		e.Kubernetes = k
		return e, diags
	}
	return nil, hcl.Diagnostics{errorDiag("Unknown engine",
		fmt.Sprintf("The engine %q is not one kewplan drives.%s Use %q (containers on the Docker engine; the default) or %q (Jobs on a Kubernetes cluster).", name, didYouMean(name, []string{EngineDocker, EngineKubernetes}), EngineDocker, EngineKubernetes),
		block.LabelRanges[0])}
}

func decodeKubernetesEngine(block *hcl.Block) (*KubernetesEngine, hcl.Diagnostics) {
	const where = `the engine "kubernetes" block`
	k := &KubernetesEngine{ProxySelector: DefaultProxySelector, ProxyService: DefaultProxyService,
		ProxyPort: DefaultProxyPort, TTLAfterFinished: DefaultTTLAfterFinished, ScratchSize: DefaultScratchSize,
		HomeSize: DefaultHomeSize, Ranges: map[string]hcl.Range{}, DeclRange: block.DefRange}
	content, diags := bodyContent(block.Body, kubernetesEngineSchema, where)

	str := func(name string, check func(string) string, dst *string) {
		attr, ok := content.Attributes[name]
		if !ok {
			return
		}
		s, d := constString(attr, where)
		diags = append(diags, d...)
		if d.HasErrors() {
			return
		}
		k.Ranges[name] = attr.Expr.Range()
		if msg := check(s); msg != "" {
			diags = append(diags, errorDiag("Invalid "+name, msg, attr.Expr.Range()))
			return
		}
		*dst = s
	}
	name := func(attr, what string, pattern *regexp.Regexp, max int) func(string) string {
		return func(s string) string {
			if len(s) > max || !pattern.MatchString(s) {
				return fmt.Sprintf("The %s %q is not a Kubernetes %s name. It must be at most %d characters of lower-case letters, digits and '-'%s, starting and ending with a letter or digit, for example %q.", attr, s, what, max, map[bool]string{true: " and '.'", false: ""}[pattern == dns1123Subdomain], "agents")
			}
			return ""
		}
	}
	str("context", func(s string) string {
		if !contextPattern.MatchString(s) {
			return "The context must name a kubeconfig context: a non-empty string without control characters. Remove the argument to use the current context."
		}
		return ""
	}, &k.Context)
	str("namespace", name("namespace", "namespace", dns1123Label, 63), &k.Namespace)
	str("runtime_class", name("runtime_class", "RuntimeClass", dns1123Subdomain, 253), &k.RuntimeClass)
	str("git_secret", name("git_secret", "Secret", dns1123Subdomain, 253), &k.GitSecret)
	str("credentials_secret", name("credentials_secret", "Secret", dns1123Subdomain, 253), &k.CredentialsSecret)
	str("git_image", checkImageRef, &k.GitImage)
	str("proxy_image", checkImageRef, &k.ProxyImage)
	str("proxy_namespace", name("proxy_namespace", "namespace", dns1123Label, 63), &k.ProxyNamespace)
	str("proxy_service", name("proxy_service", "Service", dns1123Label, 63), &k.ProxyService)
	size := func(attr string) func(string) string {
		return func(s string) string {
			if !quantityPattern.MatchString(s) {
				return fmt.Sprintf("The %s %q is not a Kubernetes quantity. Write a number with a unit such as \"512Mi\" or \"2Gi\".", attr, s)
			}
			return ""
		}
	}
	str("tmp_size", size("tmp_size"), &k.ScratchSize)
	str("home_size", size("home_size"), &k.HomeSize)

	num := func(name string, lo, hi int64, dst *int64) {
		attr, ok := content.Attributes[name]
		if !ok {
			return
		}
		n, d := constWholeNumber(attr, where)
		diags = append(diags, d...)
		if d.HasErrors() {
			return
		}
		k.Ranges[name] = attr.Expr.Range()
		if n < lo || n > hi {
			diags = append(diags, errorDiag("Invalid "+name,
				fmt.Sprintf("The %s is %d; it must be between %d and %d.", name, n, lo, hi), attr.Expr.Range()))
			return
		}
		*dst = n
	}
	num("proxy_port", 1, 65535, &k.ProxyPort)
	num("ttl_seconds_after_finished", 0, 7*24*3600, &k.TTLAfterFinished)

	if attr, ok := content.Attributes["proxy_selector"]; ok {
		sel, d := decodeLabelMap(attr, where)
		diags = append(diags, d...)
		if !d.HasErrors() {
			k.ProxySelector = sel
			k.Ranges["proxy_selector"] = attr.Expr.Range()
		}
	}
	if k.ProxyNamespace == "" {
		k.ProxyNamespace = k.Namespace
	}
	if k.ProxyImage != "" {
		// kewplan's own proxy runs beside the Jobs, under its own labels: an operator's selector or namespace would
		// point the NetworkPolicy somewhere else than the proxy kewplan renders.
		for _, other := range []string{"proxy_selector", "proxy_namespace", "proxy_service"} {
			if r, ok := k.Ranges[other]; ok {
				diags = append(diags, errorDiag("Conflicting proxy settings",
					fmt.Sprintf("proxy_image runs kewplan's egress proxy in the Jobs' namespace under its own labels and name, so %s cannot be set with it. Remove %s to use kewplan's proxy, or remove proxy_image to use the operator's proxy that %s names.", other, other, other), r))
			}
		}
	}
	return k, diags
}

// decodeLabelMap decodes a literal map of Kubernetes label keys to values.
func decodeLabelMap(attr *hcl.Attribute, where string) (map[string]string, hcl.Diagnostics) {
	pairs, diags := hcl.ExprMap(attr.Expr)
	if diags.HasErrors() || len(pairs) == 0 {
		return nil, hcl.Diagnostics{errorDiag("Wrong value type",
			fmt.Sprintf("The %s argument of %s must be a non-empty map of label keys to values, written in braces, for example %s = { \"app.kubernetes.io/name\" = \"egress-proxy\" }.", attr.Name, where, attr.Name),
			attr.Expr.Range())}
	}
	out := map[string]string{}
	for _, kv := range pairs {
		key, d := constString(&hcl.Attribute{Name: attr.Name, Expr: kv.Key, Range: kv.Key.Range(), NameRange: attr.NameRange}, where)
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		val, d := constString(&hcl.Attribute{Name: attr.Name, Expr: kv.Value, Range: kv.Value.Range(), NameRange: attr.NameRange}, where)
		diags = append(diags, d...)
		if d.HasErrors() {
			continue
		}
		if !labelKeyPattern.MatchString(key) || len(key) > 317 {
			diags = append(diags, errorDiag("Invalid label key",
				fmt.Sprintf("%q is not a Kubernetes label key: an optional DNS prefix and '/', then at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit.", key), kv.Key.Range()))
			continue
		}
		if !labelValPattern.MatchString(val) {
			diags = append(diags, errorDiag("Invalid label value",
				fmt.Sprintf("%q is not a Kubernetes label value: at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit.", val), kv.Value.Range()))
			continue
		}
		out[key] = val
	}
	return out, diags
}

// Engine returns the engine block of that name, or nil.
func (c *Config) Engine(name string) *Engine {
	if c == nil || c.Engines == nil {
		return nil
	}
	return c.Engines[name]
}

// decodeEngine decodes one engine block into c.Engines, refusing a second block of the same engine.
func (c *Config) decodeEngine(block *hcl.Block) hcl.Diagnostics {
	e, diags := decodeEngineBlock(block)
	if e == nil {
		return diags
	}
	if c.Engines == nil {
		c.Engines = map[string]*Engine{}
	}
	if prev, ok := c.Engines[e.Name]; ok {
		return append(diags, c.duplicateDiag("engine", e.Name, block, prev.DeclRange))
	}
	c.Engines[e.Name] = e
	return diags
}

// SelectEngine is the engine a plan or apply runs on: the --engine flag when given, else the configuration's only
// engine block, else Docker. Kubernetes needs its engine block (namespace and Secrets); Docker needs none. The
// error diagnostic says which flag or block to add.
func (c *Config) SelectEngine(flag string) (string, hcl.Diagnostics) {
	name := flag
	if name == "" {
		name = EngineDocker
		if c != nil && len(c.Engines) == 1 {
			for only := range c.Engines {
				name = only
			}
		}
	}
	switch name {
	case EngineDocker:
		return name, nil
	case EngineKubernetes:
		if c.Engine(EngineKubernetes) == nil {
			return "", hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "No kubernetes engine",
				Detail: `The configuration has no engine "kubernetes" block, so nothing says which namespace and Secrets the Jobs use. Add one, for example: engine "kubernetes" { namespace = "agents"  git_secret = "kewplan-git"  credentials_secret = "agent-keys" }.`}}
		}
		return name, nil
	}
	return "", hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Unknown engine",
		Detail: fmt.Sprintf("--engine %q is not an engine kewplan drives.%s Use %q (containers on the Docker engine) or %q (Jobs on a Kubernetes cluster).",
			name, didYouMean(name, []string{EngineDocker, EngineKubernetes}), EngineDocker, EngineKubernetes)}}
}
