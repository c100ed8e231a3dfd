package planner

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/kewplan/kewplan/config"
)

// Rule ids of the organisation policy (the `policy` block, in the configuration or given with --policy FILE).
// Each is an error: a policy states what an organisation refuses, not what it would like.
const (
	RulePolicyRequirePinnedImages  = "policy-require-pinned-images"
	RulePolicyAllowedNetworks      = "policy-allowed-networks"
	RulePolicyAllowedImagePrefixes = "policy-allowed-image-prefixes"
	RulePolicyCredentials          = "policy-credentials"
	RulePolicyMaxPidsLimit         = "policy-max-pids-limit"
	RulePolicyRuntime              = "policy-runtime"
	RulePolicyEgress               = "policy-egress"
	RulePolicyCredentialMode       = "policy-credential-mode"
)

// PolicyRules are the catalogue entries of the organisation policy; they are part of Rules().
func PolicyRules() []Rule {
	return []Rule{
		{
			ID: RulePolicyRequirePinnedImages, Severity: SeverityError,
			Summary:     "Image not pinned, as the policy requires",
			Description: "The organisation policy sets require_pinned_images: every image must be named by its @sha256: digest, so that the image that runs is the one that was reviewed. A tag can be moved to other content after approval.",
			Help:        "Pin the image in the sandbox block: \"name:tag@sha256:<digest>\" (docker inspect --format '{{index .RepoDigests 0}}' shows the digest).",
		},
		{
			ID: RulePolicyCredentialMode, Severity: SeverityError,
			Summary:     "Credentials forwarded, which the policy forbids",
			Description: "The organisation policy sets require_brokered_credentials: no container may hold a real credential. A brokered node holds a placeholder, and kewplan's egress proxy adds the value only on requests to its runner's endpoints while it runs; a forwarded one holds the value, which a prompt-injected agent can send to any host it reaches, write into a commit or print.",
			Help:        "Make the node brokered: remove credentials = \"forward\", give its runner a base_url variable and endpoints, and keep network = \"allowlist\" with kewplan's own proxy.",
		},
		{
			ID: RulePolicyAllowedNetworks, Severity: SeverityError,
			Summary:     "Network mode not allowed by the policy",
			Description: "The organisation policy lists the sandbox network modes it allows (allowed_networks). Open egress lets a prompt-injected agent send what it holds, credentials and code, anywhere.",
			Help:        "Set the sandbox network to a mode the policy allows, normally network = \"allowlist\".",
		},
		{
			ID: RulePolicyAllowedImagePrefixes, Severity: SeverityError,
			Summary:     "Image not from a registry the policy allows",
			Description: "The organisation policy lists the image name prefixes it allows (allowed_image_prefixes), so that agents run only images the organisation builds or vets.",
			Help:        "Use an image whose reference starts with one of the allowed prefixes, or have the policy extended.",
		},
		{
			ID: RulePolicyCredentials, Severity: SeverityError,
			Summary:     "Credential not allowed for this runner by the policy",
			Description: "The organisation policy maps each credential to the runners that may receive it (credentials). A credential forwarded to any other runner, or one the policy does not list, widens what a prompt-injected agent in that container can exfiltrate.",
			Help:        "Route the node to a runner the policy allows for that credential, remove the credential from the runner's declaration, or have the policy extended.",
		},
		{
			ID: RulePolicyMaxPidsLimit, Severity: SeverityError,
			Summary:     "PIDs limit above the policy's maximum",
			Description: "The organisation policy bounds every container's --pids-limit (max_pids_limit): the limit is what stops a fork bomb from exhausting the host.",
			Help:        "Lower pids_limit in the sandbox block to at most the policy's max_pids_limit.",
		},
		{
			ID: RulePolicyRuntime, Severity: SeverityError,
			Summary:     "Runtime not the one the policy requires",
			Description: "The organisation policy names the container runtime (isolation tier) every node must run on (required_runtime), such as gVisor's runsc: under the engine's default runtime, runc, the agent shares the host's kernel, and one kernel bug is a way out of the container.",
			Help:        "Set runtime to the required runtime in the sandbox block (every node) or in the node's block, and register that runtime with the engine (README: Isolation tiers).",
		},
		{
			ID: RulePolicyEgress, Severity: SeverityError,
			Summary:     "Egress beyond what the policy allows",
			Description: "The organisation policy bounds the hosts any node may reach (allowed_egress), and may forbid hosts on private addresses (forbid_private_hosts). A node that can reach another host, or any host on the open network, can send what it holds, credentials and code, there; one that reaches a private address reaches into the operator's own network.",
			Help:        "Remove the host from the sandbox's or the node's egress block (or the runner's endpoints) or from private_hosts, keep network = \"allowlist\", or have the policy extended.",
		},
	}
}

func init() {
	RegisterRules(PolicyRules()...)
	registerPlanCheck(checkPolicies)
}

// checkPolicies applies the configuration's policy block and the --policy file, if any, and refuses the nodes
// that break them: they keep their place in the plan but get no argv.
func checkPolicies(cfg *config.Config, in Inputs, p *Plan) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, pol := range []*config.Policy{cfg.Policy, in.Policy} {
		if pol == nil {
			continue
		}
		found, refused := checkPolicy(cfg, p, pol)
		diags = append(diags, found...)
		for _, np := range p.Nodes {
			if refused[np.Name] {
				np.Errors = true
				np.Container = nil
			}
		}
	}
	return diags
}

// CheckPolicy checks a finished plan against an organisation policy, without changing the plan. Build already
// applies the configuration's policy and Inputs.Policy; CheckPolicy serves callers holding a plan and another
// policy. Without the configuration, the diagnostics point at the nodes' blocks.
func CheckPolicy(plan *Plan, p *config.Policy) hcl.Diagnostics {
	if plan == nil || p == nil {
		return nil
	}
	diags, _ := checkPolicy(nil, plan, p)
	return diags
}

var policyPinnedDigest = regexp.MustCompile(`@sha256:[0-9a-f]{64}$`)

// policyViolation groups the nodes that break one policy rule at one place, so a sandbox setting shared by a hundred
// nodes is one diagnostic, not a hundred.
type policyViolation struct {
	rule    string
	subject hcl.Range
	what    string // the offending value, for the detail
	nodes   []string
}

// checkPolicy returns the diagnostics and the names of the nodes that break the policy. cfg may be nil.
func checkPolicy(cfg *config.Config, plan *Plan, pol *config.Policy) (hcl.Diagnostics, map[string]bool) {
	var order []*policyViolation
	byKey := map[string]*policyViolation{}
	refused := map[string]bool{}
	add := func(rule string, subject hcl.Range, what, node string) {
		key := fmt.Sprintf("%s\x00%s\x00%s:%d:%d", rule, what, subject.Filename, subject.Start.Line, subject.Start.Column)
		v := byKey[key]
		if v == nil {
			v = &policyViolation{rule: rule, subject: subject, what: what}
			byKey[key] = v
			order = append(order, v)
		}
		v.nodes = append(v.nodes, node)
		refused[node] = true
	}
	where := policyWhere(pol)

	for _, np := range plan.Nodes {
		if np.Image != "" {
			if pol.RequirePinnedImages && !policyPinnedDigest.MatchString(np.Image) {
				add(RulePolicyRequirePinnedImages, policyImageRange(cfg, np), np.Image, np.Name)
			}
			if len(pol.AllowedImagePrefixes) > 0 && !policyHasAnyPrefix(np.Image, pol.AllowedImagePrefixes) {
				add(RulePolicyAllowedImagePrefixes, policyImageRange(cfg, np), np.Image, np.Name)
			}
		}
		if len(pol.AllowedNetworks) > 0 && np.Network != "" && !contains(pol.AllowedNetworks, np.Network) {
			add(RulePolicyAllowedNetworks, policySandboxRange(cfg, np, func(s *config.Sandbox) hcl.Range { return s.NetworkRange }),
				np.Network, np.Name)
		}
		if pol.Credentials != nil {
			for i, cred := range np.Credentials {
				allowed, listed := pol.Credentials[cred]
				if listed && contains(allowed, np.Runner) {
					continue
				}
				add(RulePolicyCredentials, policyCredentialRange(cfg, np, i), cred+"\x00"+np.Runner, np.Name)
			}
		}
		if pol.AllowedEgress != nil {
			checkPolicyEgress(cfg, np, pol, add)
		}
		if pol.ProviderFetch != nil {
			checkPolicyProviderFetch(cfg, np, pol, add)
		}
		if pol.ForbidPrivateHosts {
			for _, h := range np.PrivateHosts {
				add(RulePolicyEgress, privateHostRange(cfg, np, h), privateHostMark+h, np.Name)
			}
		}
		if pol.MaxPidsLimit > 0 {
			if pids, ok := policyPidsLimit(cfg, np); ok && (pids > pol.MaxPidsLimit || pids <= 0) {
				add(RulePolicyMaxPidsLimit, policySandboxRange(cfg, np, func(s *config.Sandbox) hcl.Range { return s.PidsLimitRange }),
					fmt.Sprint(pids), np.Name)
			}
		}
		if pol.RequiredRuntime != "" && np.Runtime != pol.RequiredRuntime && !policyRuntimeUndecided(cfg, np) {
			add(RulePolicyRuntime, policyRuntimeRange(cfg, np), np.Runtime, np.Name)
		}
		if pol.RequireBrokeredCredentials && len(np.Credentials) > 0 && np.CredentialMode == config.CredentialsForward {
			add(RulePolicyCredentialMode, policyCredentialModeRange(cfg, np), strings.Join(np.Credentials, ", "), np.Name)
		}
	}

	var diags hcl.Diagnostics
	for _, v := range order {
		var detail string
		switch v.rule {
		case RulePolicyRequirePinnedImages:
			detail = fmt.Sprintf("The image %q (used by %s) has no @sha256: digest, and the policy%s requires every image pinned.",
				v.what, countNodes(v.nodes), where)
		case RulePolicyAllowedImagePrefixes:
			detail = fmt.Sprintf("The image %q (used by %s) starts with none of the prefixes the policy%s allows: %s.",
				v.what, countNodes(v.nodes), where, policyQuoteList(pol.AllowedImagePrefixes))
		case RulePolicyAllowedNetworks:
			detail = fmt.Sprintf("%s %s network = %q, and the policy%s allows only %s.",
				policyCapitalise(countNodes(v.nodes)), pick(len(v.nodes) == 1, "has", "have"), v.what, where, policyQuoteList(pol.AllowedNetworks))
		case RulePolicyCredentials:
			cred, runner, _ := strings.Cut(v.what, "\x00")
			allowed, listed := pol.Credentials[cred]
			switch {
			case !listed:
				detail = fmt.Sprintf("The runner %q forwards %s to %s, and the policy%s does not list %s among the credentials it allows.",
					runner, cred, countNodes(v.nodes), where, cred)
			case len(allowed) == 0:
				detail = fmt.Sprintf("The runner %q forwards %s to %s, and the policy%s allows no runner to receive %s.",
					runner, cred, countNodes(v.nodes), where, cred)
			default:
				detail = fmt.Sprintf("The runner %q forwards %s to %s, and the policy%s allows %s only for %s.",
					runner, cred, countNodes(v.nodes), where, cred, policyQuoteList(allowed))
			}
		case RulePolicyRuntime:
			detail = fmt.Sprintf("%s %s on %s, and the policy%s requires every node on %s.",
				policyCapitalise(countNodes(v.nodes)), pick(len(v.nodes) == 1, "runs", "run"), IsolationTier(v.what), where,
				IsolationTier(pol.RequiredRuntime))
		case RulePolicyEgress:
			if h, ok := strings.CutPrefix(v.what, privateHostMark); ok {
				detail = fmt.Sprintf("%s may reach %s on a private address (private_hosts), and the policy%s sets forbid_private_hosts: no node may reach a host inside the operator's network.",
					policyCapitalise(countNodes(v.nodes)), h, where)
			} else if v.what == config.NetworkOpen {
				detail = fmt.Sprintf("%s %s network = \"open\" and can reach any host, and the policy%s allows egress only to %s.",
					policyCapitalise(countNodes(v.nodes)), pick(len(v.nodes) == 1, "has", "have"), where, policyPatternList(pol.AllowedEgress))
			} else {
				detail = fmt.Sprintf("%s can reach %s, which none of the hosts the policy%s allows covers: %s.",
					policyCapitalise(countNodes(v.nodes)), v.what, where, policyPatternList(pol.AllowedEgress))
			}
		case RulePolicyProviderFetch:
			detail = policyProviderFetchDetail(v.what, v.nodes, where, pol)
		case RulePolicyCredentialMode:
			detail = fmt.Sprintf("%s would hold %s in %s (credentials forwarded), and the policy%s requires brokered credentials: a container holds only a placeholder.",
				policyCapitalise(countNodes(v.nodes)), v.what, pick(len(v.nodes) == 1, "its container", "their containers"), where)
		case RulePolicyMaxPidsLimit:
			detail = fmt.Sprintf("%s %s pids_limit %s, and the policy%s allows at most %d.",
				policyCapitalise(countNodes(v.nodes)), pick(len(v.nodes) == 1, "has", "have"), v.what, where, pol.MaxPidsLimit)
		}
		subject := v.subject
		diags = append(diags, NewDiagnostic(v.rule, rangePtr(subject), detail))
	}
	return diags, refused
}

// checkPolicyEgress reports each host of the node's egress list that no allowed_egress pattern covers, where the
// host is written; an open node reaches any host and breaks any allowed_egress.
func checkPolicyEgress(cfg *config.Config, np *NodePlan, pol *config.Policy, add func(rule string, subject hcl.Range, what, node string)) {
	if np.Network == config.NetworkOpen {
		add(RulePolicyEgress, policySandboxRange(cfg, np, func(s *config.Sandbox) hcl.Range { return s.NetworkRange }),
			config.NetworkOpen, np.Name)
		return
	}
	node := nodeBlock(cfg, np)
	for _, h := range np.Egress {
		covered := false
		for _, p := range pol.AllowedEgress {
			if p.Covers(h.Pattern()) {
				covered = true
				break
			}
		}
		if covered {
			continue
		}
		subject := np.DeclRange
		if cfg != nil {
			subject = egressRange(cfg, node, h)
		}
		add(RulePolicyEgress, subject, h.String(), np.Name)
	}
}

// privateHostMark prefixes a private host in a policy-egress violation, apart from an egress host.
const privateHostMark = "private\x00"

// privateHostRange is where a node's private host is written: its own egress block, else the sandbox's.
func privateHostRange(cfg *config.Config, np *NodePlan, host string) hcl.Range {
	find := func(ps []config.HostPattern) (hcl.Range, bool) {
		for _, p := range ps {
			if p.String() == host && p.Range.Filename != "" {
				return p.Range, true
			}
		}
		return hcl.Range{}, false
	}
	if cfg != nil {
		if n := nodeBlock(cfg, np); n != nil && n.Egress != nil {
			if r, ok := find(n.Egress.PrivateHosts); ok {
				return r
			}
		}
		if cfg.Sandbox != nil {
			if r, ok := find(cfg.Sandbox.Egress.PrivateHosts); ok {
				return r
			}
		}
	}
	return np.DeclRange
}

func policyPatternList(ps []config.HostPattern) string {
	q := make([]string, len(ps))
	for i, p := range ps {
		q[i] = fmt.Sprintf("%q", p.String())
	}
	return strings.Join(q, ", ")
}

// policyWhere names the policy's declaration for details: " (policy.hcl:3)".
func policyWhere(pol *config.Policy) string {
	if pol.DeclRange.Filename == "" {
		return ""
	}
	return fmt.Sprintf(" (%s:%d)", pol.DeclRange.Filename, pol.DeclRange.Start.Line)
}

// policyImageRange is where the node's image is written: its entry in the sandbox images map, else the legacy image,
// else the node's block.
func policyImageRange(cfg *config.Config, np *NodePlan) hcl.Range {
	if cfg != nil && cfg.Sandbox != nil {
		sb := cfg.Sandbox
		if r, ok := sb.ImageRanges[np.Runner]; ok && sb.Images[np.Runner] == np.Image && r.Filename != "" {
			return r
		}
		if sb.Image == np.Image && sb.ImageRange.Filename != "" {
			return sb.ImageRange
		}
	}
	return np.DeclRange
}

// policySandboxRange is where a sandbox setting is written, else the sandbox block, else the node's block (a default
// that nobody wrote is best fixed where the node is).
func policySandboxRange(cfg *config.Config, np *NodePlan, attr func(*config.Sandbox) hcl.Range) hcl.Range {
	if cfg != nil && cfg.Sandbox != nil {
		if r := attr(cfg.Sandbox); r.Filename != "" {
			return r
		}
		if cfg.Sandbox.DeclRange.Filename != "" {
			return cfg.Sandbox.DeclRange
		}
	}
	return np.DeclRange
}

// policyCredentialRange is where the i-th credential of the node is declared: its entry in a runner block that declares
// credentials, else the node's runner attribute (a built-in's declaration lives in kewplan), else the node.
func policyCredentialRange(cfg *config.Config, np *NodePlan, i int) hcl.Range {
	if cfg == nil {
		return np.DeclRange
	}
	cred := np.Credentials[i]
	if r, ok := cfg.Runners[np.Runner]; ok && r.Credentials != nil {
		for j, c := range r.Credentials {
			if c == cred && j < len(r.CredentialRanges) && r.CredentialRanges[j].Filename != "" {
				return r.CredentialRanges[j]
			}
		}
		if r.CredentialsRange.Filename != "" {
			return r.CredentialsRange
		}
	}
	if n := nodeBlock(cfg, np); n != nil {
		if a, ok := n.Attrs["runner"]; ok && a != nil {
			return a.Range
		}
	}
	return np.DeclRange
}

// policyRuntimeRange is where the node's runtime is chosen: its own runtime attribute, else the sandbox's, else the
// sandbox block, else the node's block (the engine's default, which nobody wrote, is best fixed where the node is).
func policyRuntimeRange(cfg *config.Config, np *NodePlan) hcl.Range {
	if n := nodeBlock(cfg, np); n != nil {
		if a, ok := n.Attrs["runtime"]; ok && a != nil {
			return a.Expr.Range()
		}
	}
	return policySandboxRange(cfg, np, func(s *config.Sandbox) hcl.Range { return s.RuntimeRange })
}

// policyRuntimeUndecided is true for a node whose runtime attribute could not be evaluated (an error already refuses
// the node): a written runtime is never "", so "" there is not the engine's default.
func policyRuntimeUndecided(cfg *config.Config, np *NodePlan) bool {
	if np.Runtime != "" {
		return false
	}
	n := nodeBlock(cfg, np)
	return n != nil && n.Runtime != nil
}

// nodeBlock is the node block np was planned from (an instance's is its for_each or count block); nil without a
// configuration.
func nodeBlock(cfg *config.Config, np *NodePlan) *config.Node {
	if cfg == nil {
		return nil
	}
	block := np.Block
	if block == "" {
		block = np.Name
	}
	return cfg.Nodes[block]
}

// pidsLimit is the node's --pids-limit: from its container, else from the sandbox.
func policyPidsLimit(cfg *config.Config, np *NodePlan) (int64, bool) {
	if np.Container != nil {
		return np.Container.PidsLimit, true
	}
	if cfg != nil && cfg.Sandbox != nil {
		return cfg.Sandbox.PidsLimit, true
	}
	return 0, false
}

func policyHasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func policyQuoteList(list []string) string {
	q := make([]string, len(list))
	for i, v := range list {
		q[i] = fmt.Sprintf("%q", v)
	}
	sort.Strings(q)
	return strings.Join(q, ", ")
}

func policyCapitalise(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// policyCredentialModeRange is where a node's credentials mode was decided: its own credentials attribute, the
// sandbox's, or the node's block.
func policyCredentialModeRange(cfg *config.Config, np *NodePlan) hcl.Range {
	if cfg != nil {
		if n := cfg.Nodes[np.Block]; n != nil && n.Credentials != nil {
			return n.Credentials.Range()
		}
		if cfg.Sandbox != nil && cfg.Sandbox.CredentialsExplicit {
			return cfg.Sandbox.CredentialsRange
		}
	}
	return np.DeclRange
}
