package planner

import (
	"io/fs"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/runners"
)

// Inputs are what Build needs besides the configuration.
type Inputs struct {
	Vars map[string]cty.Value // resolved variable values (config.ResolveVariables)
	// Outputs are the known outputs of nodes that already finished (apply re-renders downstream nodes with them),
	// by node address ("fix", `fix["api"]`).
	Outputs map[string]map[string]cty.Value
	FS      fs.FS // serves file()/templatefile(), rooted at the configuration's directory
	// Targets are --target addresses: plan these nodes ("fix": every instance) or instances (`fix["web"]`,
	// "shard[2]") and everything they depend on; empty means all.
	Targets []string
	// Policy is an organisation policy given outside the configuration (kewplan plan --policy FILE); nil when
	// none was given. The configuration's own policy block is cfg.Policy.
	Policy *config.Policy
}

// Plan is the result of Build.
type Plan struct {
	ConfigDigest string              // sha256 over configuration files, files read by functions, and variable values
	Nodes        []*NodePlan         // dependency order; ties broken by name
	Exposure     map[string][]string // credential name -> nodes it reaches, sorted
	Diagnostics  hcl.Diagnostics
	// Budget is the apply-wide cap and worst case.
	Budget *ApplyBudget
	// RefuseUnmaskableCredentials is the policy's refuse_unmaskable_credentials (the configuration's or the
	// --policy file's): apply refuses to start when a credential is too short to mask.
	RefuseUnmaskableCredentials bool
	// DigestInputs are what ConfigDigest covers, kept for saved plans and their staleness check.
	DigestInputs DigestInputs
}

// NodePlan is one node's decisions.
type NodePlan struct {
	// Name is the node's address, unique in the plan: the block name ("fix") for a node without for_each or
	// count, an instance address (`fix["api"]`, "shard[2]") otherwise. DependsOn, Exposure, --target, the
	// ledger and diff all use it. It may hold quotes, brackets and any character of a for_each key: never use it
	// as a file, container or branch name; use Slug.
	Name string
	// Block is the node block's name; equal to Name for a node without for_each or count.
	Block string
	// Key is the instance key: a cty.String (for_each), a cty.Number (count), or cty.NilVal.
	Key cty.Value
	// Slug is Name made safe and unique for names outside kewplan (config.InstanceSlug): [a-z0-9_-] only for an
	// instance ("fix-api", "shard-2", "fix-my-api-3f2a9c1d"), the block name otherwise, at most 59 characters.
	// The container is "kew-<Slug>", the default branch "kew/<Slug>"; checkout, log and verdict paths must use
	// it too.
	Slug     string
	Runner   string
	Protocol string
	Role     string // config.RoleWorker or config.RoleReviewer
	Image    string
	Network  string // config.NetworkAllowlist or config.NetworkOpen
	Runtime  string // container runtime (isolation tier), e.g. "runsc"; "" for the engine's default
	Model    string
	Repo     string
	Ref      string
	// Branch is the branch a worker pushes to (its branch attribute, else "kew/<slug>"); a reviewer pushes
	// nothing (see Pushes).
	Branch string
	// AllowProtectedPush is the node's allow_protected_push: it may push to a protected branch.
	AllowProtectedPush bool
	// ProtectedBranches are the branch patterns the node may not push to (ProtectedBranches): the broker checks
	// them again at apply, with the remote's default branch.
	ProtectedBranches []string
	// ResumeFromSalvage is the node's (or the sandbox's) resume_from_salvage: apply --resume starts it, when it
	// runs again, from the work kept of it in the run resumed.
	ResumeFromSalvage bool
	Timeout           time.Duration
	PidsLimit         int64    // the sandbox's limits, which every container of the plan gets
	Memory            string   // "" when unset
	CPUs              string   // "" when unset
	TmpfsSize         string   // the size= of the /tmp and /home/agent tmpfs mounts
	Credentials       []string // names, in declared order
	// CredentialOrigins says where each credential came from, parallel to Credentials: "builtin" or the
	// runner block's range as "file:line" for an override or a custom runner. Policy review flags widening.
	CredentialOrigins []string
	// CredentialMode is how the container gets its credentials: config.CredentialsBrokered (it holds placeholders;
	// the egress proxy adds the real values on requests to BrokeredEndpoints only) or config.CredentialsForward
	// (it holds the values). "" when the node has no runner or credentials.
	CredentialMode string
	// BaseURLVar is the variable a brokered node's agent reads its API base URL from, pointed at the proxy.
	BaseURLVar string
	// PrivateHosts are the entries of Egress ("host", or "host:port" as written) whose names may resolve to private
	// ranges, from the sandbox's and the node's private_hosts, sorted; nil for none and for an open node.
	PrivateHosts []string
	// BrokeredEndpoints are the hosts ("host" or "host:port") for which the proxy adds a brokered node's
	// credentials: its runner's endpoints.
	BrokeredEndpoints []string
	// ProviderFetch are the provider-fetch features (config.ProviderFetchFeatures) the node's model requests may
	// make the provider fetch with, sorted. A brokered node has its own and the sandbox's provider_fetch that
	// its runner's API can use, and kewplan's broker refuses every other; a node whose container holds its
	// credentials has every feature, for its agent calls the provider directly and nothing judges what it asks.
	// nil for none.
	ProviderFetch []string
	// BrokeredPaths are the methods and paths (from the endpoint's root) the proxy forwards for a brokered node:
	// its runner's API's (runners.BrokeredAPIPaths) under the base URL's path; nil for a node not brokered.
	BrokeredPaths []runners.APIPath
	// Egress are the hosts an allowlist node may reach through the egress proxy, sorted, with their origins; nil
	// for an open node (it reaches any host) and empty for an allowlist node that may reach none.
	Egress    []EgressHost
	DependsOn []string
	Prompt    Prompt
	// Unknown names the attributes whose values are known only after apply (e.g. "ref", "prompt").
	Unknown   []string
	Container *Container // nil when the node has an error, or its argv is known only after apply
	// PullRequest is the evaluated pull_request block; nil when none was written.
	PullRequest *PullRequestPlan
	// Budget is the node's effective caps with their origins (the timeout included).
	Budget *NodeBudget
	// Errors is true when a diagnostic of severity error concerns this node.
	Errors bool
	// Retry is the node's effective retry policy (see RetryPolicy); attempts 1 when no retry block applies.
	Retry     RetryPolicy
	DeclRange hcl.Range
}

// PullRequestPlan is a node's pull_request block, evaluated.
type PullRequestPlan struct {
	Base  string
	Title string
}

// Prompt describes the prompt without ever placing it in argv.
type Prompt struct {
	Text   string // the full prompt, reviewer paragraph included; never rendered in views
	SHA256 string // hex digest of Text; "" while the prompt is unknown
	Bytes  int
}

// Known is true when the prompt's text is known at plan time.
func (p Prompt) Known() bool { return p.SHA256 != "" }

// Node returns the plan of the named node, or nil.
func (p *Plan) Node(name string) *NodePlan {
	for _, n := range p.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// HasErrors reports whether the plan carries any error diagnostic.
func (p *Plan) HasErrors() bool { return p.Diagnostics.HasErrors() }

// PlanCheck is a check over a finished plan. Files of this package register checks with registerPlanCheck in an
// init function (the organisation policy in policy*.go does). A check returns its diagnostics and, for a node
// it refuses, sets that node's Errors and clears its Container so no argv is rendered for it.
type PlanCheck func(cfg *config.Config, in Inputs, p *Plan) hcl.Diagnostics

var planChecks []PlanCheck

func registerPlanCheck(c PlanCheck) { planChecks = append(planChecks, c) }

// PlannedBlocks reports the node blocks of which p holds an instance: after a plan without errors, the blocks
// whose every instance was evaluated without error (what config.Config.CheckValues need not evaluate again).
func (p *Plan) PlannedBlocks() func(block string) bool {
	blocks := make(map[string]bool, len(p.Nodes))
	for _, np := range p.Nodes {
		blocks[np.Block] = true
	}
	return func(block string) bool { return blocks[block] }
}

// Build plans every node of cfg. It never reads the environment, Docker or git.
func Build(cfg *config.Config, in Inputs) (*Plan, hcl.Diagnostics) {
	p := &Plan{Exposure: map[string][]string{}}
	if cfg == nil {
		p.Diagnostics = hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "No configuration",
			Detail: "There is no configuration to plan; fix the errors reported while loading it."}}
		return p, p.Diagnostics
	}
	b := newBuilder(cfg, in)
	b.build(p)
	for _, check := range planChecks {
		p.Diagnostics = append(p.Diagnostics, check(cfg, in, p)...)
	}
	config.SortDiagnostics(p.Diagnostics)
	return p, p.Diagnostics
}
