package planner

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/runners"
)

// Brokered credentials. A brokered node's container holds, under each of its runner's credential names, a
// placeholder minted per node and run, and its runner's base-URL variable points at kewplan's egress proxy; the
// proxy swaps the placeholder for the real value on requests to the runner's endpoints only, while the node runs.
// A forwarded node's container holds the values, as the container entrypoint contract describes.

// Rule ids of the credentials mode.
const (
	// RuleCredentialsNotBrokered: the configuration asks for brokered credentials where they cannot be brokered
	// (no base-URL variable, no endpoint, no kewplan proxy). An error when asked for explicitly.
	RuleCredentialsNotBrokered = "credentials-not-brokered"
	// RuleCredentialsForwarded: brokering is only the default and this node cannot have it, so its container
	// holds the real values.
	RuleCredentialsForwarded = "credentials-forwarded"
)

func init() {
	RegisterRules(
		Rule{ID: RuleCredentialsNotBrokered, Severity: SeverityError,
			Summary:     "Credentials cannot be brokered",
			Description: "The configuration asks for brokered credentials (the container holds a placeholder, kewplan's egress proxy adds the real value for the runner's endpoint only), but this node's agent cannot be pointed at the proxy: its runner names no base-URL variable or no endpoint, the node has no egress proxy (network = \"open\"), or the egress goes through an operator's proxy, which cannot add the credential. kewplan fails closed rather than forward the value silently.",
			Help:        "Declare the variable the agent reads its API base URL from (base_url in the runner block) and its endpoints, use network = \"allowlist\" with kewplan's own proxy, or set credentials = \"forward\" on the node or the sandbox to hand the agent the value knowingly."},
		Rule{ID: RuleCredentialsForwarded, Severity: SeverityWarning,
			Summary:     "Credentials forwarded, not brokered",
			Description: "Brokered credentials are the default, but this node cannot have them, so its container holds the real values: whatever a prompt-injected agent can read, it can send to any host it reaches.",
			Help:        "Make the node brokerable (see credentials-not-brokered), or set credentials = \"forward\" to say the exposure is accepted."},
	)
}

// planCredentials decides the node's credentials mode and, brokered, the base-URL variable and the hosts for
// which the proxy adds the credentials. Whether a runner's nodes can be brokered is the runner's (brokering,
// decided once per runner); a node only chooses whether to ask for it.
func (b *builder) planCredentials(e *nodeEval, n *config.Node, nv *config.NodeValues, r *resolvedRunner) {
	np := e.np
	sb := b.cfg.Sandbox
	want, explicit, subject := sb.Credentials, sb.CredentialsExplicit, sb.CredentialsRange
	if want == "" {
		want = config.CredentialsBrokered
	}
	switch e.attrState("credentials", n.Credentials) {
	case evalKnown:
		want, explicit, subject = nv.Credentials, true, n.Credentials.Range()
	case evalUnknown:
		e.diags = append(e.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Credentials mode not known at plan time",
			Subject: rangePtr(n.Credentials.Range()),
			Detail:  fmt.Sprintf("The credentials mode of %s depends on a value known only after apply, so whether its container holds its credentials cannot be reviewed before it runs. Write \"brokered\" or \"forward\".", describeNode(np.Name))})
		return
	case evalInvalid:
		return
	}
	if subject.Filename == "" {
		subject = np.DeclRange
	}
	np.CredentialMode = config.CredentialsForward
	if want == config.CredentialsForward || r == nil || len(np.Credentials) == 0 {
		return
	}
	bk := r.brokering
	if bk.why == "" {
		np.CredentialMode = config.CredentialsBrokered
		np.BaseURLVar = bk.baseURL
		np.BrokeredEndpoints = bk.endpoints
		np.BrokeredPaths = bk.paths
		return
	}
	if explicit {
		e.diags = append(e.diags, NewDiagnostic(RuleCredentialsNotBrokered, rangePtr(subject),
			fmt.Sprintf("%s cannot have brokered credentials: %s", capitalise(describeNode(np.Name)), bk.why)))
		e.refused = true
		return
	}
	// One warning per cause: the open network (at the sandbox's network), else per runner (at the first node).
	key := r.name
	if sb.Network == config.NetworkOpen {
		key = "\x00open"
	}
	subjectW, who := rangePtr(n.DeclRange), fmt.Sprintf("The nodes on runner %q hold %s in their containers", r.name, strings.Join(np.Credentials, ", "))
	if sb.Network == config.NetworkOpen {
		who = "Every node holds its credentials in its container"
		if sb.NetworkRange.Filename != "" {
			subjectW = rangePtr(sb.NetworkRange)
		}
	}
	b.warnForwarded(key, np, n.DeclRange, NewDiagnostic(RuleCredentialsForwarded, subjectW, who+": "+bk.why))
}

// forwardWarning is the one credentials-forwarded warning of a cause, and the node it is reported at.
type forwardWarning struct {
	np   *NodePlan
	at   hcl.Range // the node's declaration, which orders the candidates
	diag *hcl.Diagnostic
}

// warnForwarded keeps, for each cause, the warning of the node declared first (then the least name): nodes are
// planned in parallel, and which reaches here first must not decide what the plan says, or a saved plan would
// differ from its own re-plan.
func (b *builder) warnForwarded(key string, np *NodePlan, at hcl.Range, d *hcl.Diagnostic) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.forwardWarned == nil {
		b.forwardWarned = map[string]forwardWarning{}
	}
	cur, ok := b.forwardWarned[key]
	if ok && !declaredBefore(at, np.Name, cur.at, cur.np.Name) {
		return
	}
	b.forwardWarned[key] = forwardWarning{np: np, at: at, diag: d}
}

// declaredBefore orders node declarations by file, then offset, then the node's name (instances of one block).
func declaredBefore(a hcl.Range, an string, b hcl.Range, bn string) bool {
	if a.Filename != b.Filename {
		return a.Filename < b.Filename
	}
	if a.Start.Byte != b.Start.Byte {
		return a.Start.Byte < b.Start.Byte
	}
	return an < bn
}

// forwardWarnings adds each cause's credentials-forwarded warning to the diagnostics of the node it is reported
// at (nodeDiags is in the order of nodes).
func (b *builder) forwardWarnings(nodes []*NodePlan, nodeDiags []hcl.Diagnostics) {
	if len(b.forwardWarned) == 0 {
		return
	}
	at := map[*NodePlan]int{}
	for k, np := range nodes {
		at[np] = k
	}
	keys := make([]string, 0, len(b.forwardWarned))
	for key := range b.forwardWarned {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		w := b.forwardWarned[key]
		if k, ok := at[w.np]; ok {
			nodeDiags[k] = append(nodeDiags[k], w.diag)
		}
	}
}

// brokering is whether a runner's nodes can have brokered credentials, decided once per runner: it depends on
// the sandbox and the runner only.
type brokering struct {
	why       string   // why they cannot, "" when they can
	baseURL   string   // the base-URL variable, when they can
	endpoints []string // the hosts the proxy adds the credentials for, when they can; shared by the nodes
	// paths are the methods and paths the proxy forwards for them (the API's, under the base URL's path);
	// shared by the nodes, like endpoints.
	paths []runners.APIPath
}

// newBrokering decides r's brokering.
func (b *builder) newBrokering(r *resolvedRunner) brokering {
	why := b.unbrokerable(r)
	if why != "" {
		return brokering{why: why}
	}
	bk := brokering{baseURL: b.baseURLVar(r)}
	for _, h := range r.endpoints() {
		bk.endpoints = append(bk.endpoints, h.String())
	}
	// Every brokered node of the runner holds this slice: an append to one node's must copy it.
	bk.endpoints = slices.Clip(bk.endpoints)
	api, _, base := runners.BrokeredRoute(r.name, r.protocol, bk.endpoints)
	for _, p := range runners.BrokeredAPIPaths(api) {
		p.Path = base + p.Path
		bk.paths = append(bk.paths, p)
	}
	bk.paths = slices.Clip(bk.paths)
	return bk
}

// baseURLVar is the variable the runner's agent reads its API base URL from: the runner block's base_url, else
// the built-in's; "" for none.
func (b *builder) baseURLVar(r *resolvedRunner) string {
	if r.decl != nil && r.decl.BaseURL != "" {
		return r.decl.BaseURL
	}
	v, _ := runners.BaseURLVariable(r.name)
	return v
}

// unbrokerable says why the credentials of r's nodes cannot be brokered, "" when they can.
func (b *builder) unbrokerable(r *resolvedRunner) string {
	sb := b.cfg.Sandbox
	switch {
	case sb.Network == config.NetworkOpen:
		return "with network = \"open\" its container reaches hosts directly, with no egress proxy to add the credential."
	case sb.Egress.Proxy != "":
		return fmt.Sprintf("its egress goes through the operator's proxy %s, which cannot add kewplan's credentials; remove sandbox.egress.proxy to use kewplan's own.", sb.Egress.Proxy)
	case b.baseURLVar(r) == "":
		return fmt.Sprintf("its runner %q reads its API base URL from no environment variable kewplan knows, so its agent cannot be pointed at the proxy; declare base_url = \"<VARIABLE>\" in runner %q if the agent has one.", r.name, r.name)
	case contains(r.creds, b.baseURLVar(r)):
		return fmt.Sprintf("its runner %q lists its base-URL variable %s among its credentials, so the container would get the proxy's address in place of a credential; remove it from the runner's credentials.", r.name, b.baseURLVar(r))
	case len(r.endpoints()) == 0:
		return fmt.Sprintf("its runner %q declares no endpoint, so there is no host the proxy could add the credential for; list the model API's host in the runner's endpoints.", r.name)
	}
	return ""
}
