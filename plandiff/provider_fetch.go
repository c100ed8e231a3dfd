package plandiff

import (
	"fmt"
	"strings"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/planner"
)

// Finding kinds of provider fetch: a node may now make its model provider fetch on its agent's behalf with a
// feature it could not use before (web search, a page, an MCP server, a URL source), or no longer.
const (
	KindProviderFetchWidened  = "widening-provider-fetch"
	KindProviderFetchNarrowed = "narrowing-provider-fetch"
)

var providerFetchRule = planner.Rule{
	ID: KindProviderFetchWidened, Severity: planner.SeverityError,
	Summary:     "Node's provider may fetch for it with a feature it could not use before",
	Description: "A node opts in to a provider-fetch feature (provider_fetch) it did not have in the base plan, its credentials are now forwarded (then its agent has every feature), or a new node has one. The provider's servers then search, fetch or connect where the agent names, which kewplan's egress allowlist never sees: a prompt-injected agent can send what it read to a URL of its choosing through them.",
	Help:        "Check that the node needs the feature. If it does not, remove it from the node's or the sandbox's provider_fetch; if it does, approve the change explicitly.",
}

// providerFetchOf is what a node's model requests may make its provider fetch: the document's list, or every
// feature for a node whose container holds its credentials (a plan written before credential modes forwarded
// every credential, before provider_fetch brokered nodes had none).
func providerFetchOf(n *jsonplan.NodeDocument) []string {
	if len(n.Credentials) == 0 {
		return nil
	}
	if n.CredentialMode == "" || n.CredentialMode == config.CredentialsForward {
		return config.ProviderFetchFeatures
	}
	return sortedSet(n.ProviderFetch)
}

func providerFetchText(n *jsonplan.NodeDocument) string {
	if len(n.Credentials) == 0 {
		return ""
	}
	return planner.DescribeProviderFetch(orForward(n.CredentialMode), true, providerFetchOf(n))
}

func orForward(mode string) string {
	if mode == "" {
		return config.CredentialsForward
	}
	return mode
}

// addedProviderFetchFindings: the features of a new node are new reach, one finding for them all.
func addedProviderFetchFindings(n *jsonplan.NodeDocument) []Finding {
	features := providerFetchOf(n)
	if len(features) == 0 {
		return nil
	}
	return []Finding{{Kind: KindProviderFetchWidened, Widening: true, Node: n.Name, Range: nodeRange(n),
		Message: fmt.Sprintf("The new node %s may make its provider fetch for it with %s%s.", nodeLabel(n.Name), strings.Join(features, ", "), forwardNote(n))}}
}

// compareProviderFetch finds the features a node gained (widening) and lost (narrowing), one finding each way.
func compareProviderFetch(b, h *jsonplan.NodeDocument) []Finding {
	bf, hf := providerFetchOf(b), providerFetchOf(h)
	var out []Finding
	if gained := difference(hf, bf); len(gained) > 0 {
		out = append(out, Finding{Kind: KindProviderFetchWidened, Widening: true, Node: h.Name, Range: nodeRange(h),
			Message: fmt.Sprintf("Node %s may now make its provider fetch for it with %s%s.", nodeLabel(h.Name), strings.Join(gained, ", "), forwardNote(h))})
	}
	if lost := difference(bf, hf); len(lost) > 0 {
		out = append(out, Finding{Kind: KindProviderFetchNarrowed, Node: h.Name, Range: nodeRange(h),
			Message: fmt.Sprintf("Node %s may no longer make its provider fetch for it with %s.", nodeLabel(h.Name), strings.Join(lost, ", "))})
	}
	return out
}

func forwardNote(n *jsonplan.NodeDocument) string {
	if orForward(n.CredentialMode) == config.CredentialsForward {
		return " (its credentials are forwarded: nothing judges what its agent asks the provider)"
	}
	return ""
}
