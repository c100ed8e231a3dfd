package planner

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/runners"
)

// Provider fetch: what a node's model requests may make the provider's own servers fetch on the agent's behalf
// (a web search, a page, an MCP server, an image by URL), which kewplan's egress allowlist never sees. A brokered
// node's requests pass kewplan's broker, which refuses every feature the node did not opt in to (provider_fetch in
// its or the sandbox's egress block); a forwarded node's agent calls the provider itself, with every feature.

// Rule ids of provider fetch.
const (
	// RuleProviderFetchUnsupported: a node opts in to a feature its runner's API does not have.
	RuleProviderFetchUnsupported = "provider-fetch-unsupported"
	// RuleProviderFetchUnjudged: a node opts in to features, but its credentials are forwarded, so no broker
	// judges its requests and it has every feature anyway.
	RuleProviderFetchUnjudged = "provider-fetch-unjudged"
	// RulePolicyProviderFetch: a node may make the provider fetch with a feature the policy does not allow.
	RulePolicyProviderFetch = "policy-provider-fetch"
)

// Broker APIs, as the egress proxy names them (egress.BrokerAPIAnthropic, egress.BrokerAPIOpenAI).
const (
	BrokerAPIAnthropic = "anthropic"
	BrokerAPIOpenAI    = "openai"
)

func init() {
	RegisterRules(
		Rule{ID: RuleProviderFetchUnsupported, Severity: SeverityError,
			Summary:     "Provider-fetch feature the runner's API does not have",
			Description: "The node opts in to a provider-fetch feature (provider_fetch) that its runner's model API does not offer, so the entry allows nothing: OpenRouter's OpenAI-style API has web search, web fetch and URL sources, but no code execution and no MCP connector.",
			Help:        "Remove the entry from the node's provider_fetch, or route the node to a runner whose API has the feature."},
		Rule{ID: RuleProviderFetchUnjudged, Severity: SeverityWarning,
			Summary:     "provider_fetch on a node whose credentials are forwarded",
			Description: "The node's container holds its credentials, so its agent calls the provider directly and kewplan's broker never sees what it asks the provider to fetch: the node has every provider-fetch feature, whatever provider_fetch says.",
			Help:        "Make the node brokered (remove credentials = \"forward\", keep network = \"allowlist\" and kewplan's own proxy) so that provider_fetch is enforced, or remove provider_fetch."},
		Rule{ID: RulePolicyProviderFetch, Severity: SeverityError,
			Summary:     "Provider fetch beyond what the policy allows",
			Description: "The organisation policy lists the provider-fetch features a node may opt in to (provider_fetch). With another, a prompt-injected agent can make the provider's servers fetch or connect where kewplan's egress allowlist does not reach: search or fetch the web with what it read, connect to an MCP server it names, download from a URL carrying data in its query. A node whose credentials are forwarded has every feature.",
			Help:        "Remove the feature from the node's or the sandbox's provider_fetch, keep the node's credentials brokered, or have the policy extended."},
	)
}

// BrokerAPI is the protocol of a node's model API as the broker speaks it: a built-in runner's own, else
// Anthropic's for the claude-code stdout protocol and the OpenAI-style one for every other.
func BrokerAPI(runner, protocol string) string {
	api, _, _ := runners.BrokeredRoute(runner, protocol, nil)
	return api
}

// ProviderFetchFeaturesOf are the provider-fetch features an API offers, sorted.
func ProviderFetchFeaturesOf(api string) []string {
	if api == BrokerAPIAnthropic {
		return config.ProviderFetchFeatures
	}
	return []string{config.ProviderFetchURLSources, config.ProviderFetchWebFetch, config.ProviderFetchWebSearch}
}

// planProviderFetch decides the node's provider-fetch features (NodePlan.ProviderFetch) after its credentials
// mode: a sandbox entry the node's API cannot use is left out for that node, a node entry is an error.
func (b *builder) planProviderFetch(e *nodeEval, n *config.Node) {
	np := e.np
	if len(np.Credentials) == 0 || np.CredentialMode == "" || np.Runner == "" {
		return
	}
	var own []string
	var ownRanges []hcl.Range
	if n.Egress != nil {
		own, ownRanges = n.Egress.ProviderFetch, n.Egress.ProviderFetchRanges
	}
	if np.CredentialMode == config.CredentialsForward {
		np.ProviderFetch = config.ProviderFetchFeatures
		if len(own) > 0 && b.firstReport("unjudged", n.Egress.ProviderFetchRange) {
			e.diags = append(e.diags, NewDiagnostic(RuleProviderFetchUnjudged, rangePtr(n.Egress.ProviderFetchRange),
				fmt.Sprintf("%s opts in to %s, but its credentials are forwarded: its agent calls the provider directly, so it may use every provider-fetch feature.",
					capitalise(describeNode(n.Name)), strings.Join(own, ", "))))
		}
		return
	}
	api := BrokerAPI(np.Runner, np.Protocol)
	offered := ProviderFetchFeaturesOf(api)
	var out []string
	for _, f := range b.cfg.Sandbox.Egress.ProviderFetch {
		if slices.Contains(offered, f) {
			out = append(out, f)
		}
	}
	for i, f := range own {
		if !slices.Contains(offered, f) {
			var subject hcl.Range
			if i < len(ownRanges) {
				subject = ownRanges[i]
			}
			if b.firstReport("unsupported\x00"+api, subject) {
				e.diags = append(e.diags, NewDiagnostic(RuleProviderFetchUnsupported, rangePtr(subject),
					fmt.Sprintf("%s runs %q, whose model API (%s) has no %s feature; it offers %s.",
						capitalise(describeNode(n.Name)), np.Runner, apiName(api), f, strings.Join(offered, ", "))))
			} else {
				e.refused = true // reported at the entry for another instance of the node
			}
			continue
		}
		out = append(out, f)
	}
	slices.Sort(out)
	np.ProviderFetch = slices.Compact(out)
}

// firstReport reports whether nothing was reported yet of this kind at subject, and marks it reported.
func (b *builder) firstReport(kind string, subject hcl.Range) bool {
	key := fmt.Sprintf("%s\x00%s:%d:%d", kind, subject.Filename, subject.Start.Line, subject.Start.Column)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fetchReported == nil {
		b.fetchReported = map[string]bool{}
	}
	first := !b.fetchReported[key]
	b.fetchReported[key] = true
	return first
}

func apiName(api string) string {
	if api == BrokerAPIAnthropic {
		return "Anthropic's Messages API"
	}
	return "an OpenAI-style chat completions API"
}

// DescribeProviderFetch is the one-line account of what a node may make its provider fetch, for reviewers:
// "web_search, url_sources (judged by kewplan's broker)", "none (kewplan's broker refuses every provider fetch)",
// or every feature for a forwarded node.
func DescribeProviderFetch(credentialMode string, hasCredentials bool, features []string) string {
	switch {
	case !hasCredentials:
		return "none (no credential for a model API)"
	case credentialMode == config.CredentialsForward:
		return "every feature (credentials forwarded: the agent calls the provider directly, and nothing judges what it asks)"
	case len(features) == 0:
		return "none (kewplan's broker refuses every request that would make the provider fetch)"
	}
	return strings.Join(features, ", ") + " (kewplan's broker refuses every other)"
}

// forwardedMark is the what of a policy-provider-fetch violation by a forwarded node, which has every feature.
const forwardedMark = "\x00forwarded"

// checkPolicyProviderFetch reports each of the node's provider-fetch features the policy's provider_fetch does not
// list, where the feature is written; a forwarded node once, where its credentials mode is decided.
func checkPolicyProviderFetch(cfg *config.Config, np *NodePlan, pol *config.Policy, add func(rule string, subject hcl.Range, what, node string)) {
	if np.CredentialMode == config.CredentialsForward && len(np.Credentials) > 0 {
		for _, f := range np.ProviderFetch {
			if !slices.Contains(pol.ProviderFetch, f) {
				add(RulePolicyProviderFetch, policyCredentialModeRange(cfg, np), forwardedMark, np.Name)
				return
			}
		}
		return
	}
	for _, f := range np.ProviderFetch {
		if !slices.Contains(pol.ProviderFetch, f) {
			add(RulePolicyProviderFetch, providerFetchRange(cfg, np, f), f, np.Name)
		}
	}
}

// providerFetchRange is where a node's provider-fetch feature is written: its own egress block, else the
// sandbox's, else the node's block.
func providerFetchRange(cfg *config.Config, np *NodePlan, feature string) hcl.Range {
	find := func(list []string, ranges []hcl.Range) (hcl.Range, bool) {
		for i, f := range list {
			if f == feature && i < len(ranges) && ranges[i].Filename != "" {
				return ranges[i], true
			}
		}
		return hcl.Range{}, false
	}
	if n := nodeBlock(cfg, np); n != nil && n.Egress != nil {
		if r, ok := find(n.Egress.ProviderFetch, n.Egress.ProviderFetchRanges); ok {
			return r
		}
	}
	if cfg != nil && cfg.Sandbox != nil {
		if r, ok := find(cfg.Sandbox.Egress.ProviderFetch, cfg.Sandbox.Egress.ProviderFetchRanges); ok {
			return r
		}
	}
	return np.DeclRange
}

func policyProviderFetchDetail(what string, nodes []string, where string, pol *config.Policy) string {
	allowed := "none"
	if len(pol.ProviderFetch) > 0 {
		allowed = "only " + policyQuoteList(pol.ProviderFetch)
	}
	if what == forwardedMark {
		return fmt.Sprintf("%s %s %s credentials forwarded, so %s agent calls the provider directly with every provider-fetch feature, and the policy%s allows %s.",
			policyCapitalise(countNodes(nodes)), pick(len(nodes) == 1, "has", "have"), pick(len(nodes) == 1, "its", "their"), pick(len(nodes) == 1, "its", "their"), where, allowed)
	}
	return fmt.Sprintf("%s may make the provider fetch with %s (provider_fetch), and the policy%s allows %s.",
		policyCapitalise(countNodes(nodes)), what, where, allowed)
}
