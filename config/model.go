package config

import (
	"path/filepath"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Config is one configuration: every *.hcl file of a directory (not recursive), or a single file.
// Expressions are kept unevaluated; see EvalContext.
type Config struct {
	// Dir is the directory that file() and templatefile() paths are relative to: the directory given, or the
	// directory of the file given (of the file a symbolic link leads to, when the path given is a link).
	Dir string
	// Resolved is where the path given leads when it is a symbolic link to a configuration file; "" otherwise.
	Resolved string
	// Files holds the source of every configuration file by the name used in diagnostics ranges,
	// for snippets and for the config digest. Names are relative to Dir, with forward slashes, so that every
	// view and saved plan is the same wherever the configuration was planned from; SourcePath gives the path.
	Files map[string][]byte
	// VarFiles holds the source of every --var-file read by ResolveVariables, by the name given, so that
	// diagnostics in them render with snippets. They are not part of the configuration (nor of its digest):
	// their values reach the plan as variable values.
	VarFiles map[string][]byte

	Variables map[string]*Variable
	Locals    map[string]*Local
	Sandbox   *Sandbox // never nil after Load: defaults applied, DeclRange empty when no block was written
	Runners   map[string]*Runner
	Nodes     map[string]*Node
	Policy    *Policy // nil when no policy block was written
	// Budget is the top-level budget block (the cap of the whole apply); nil when none was written.
	Budget *ApplyBudget
	// Pricing holds the pricing blocks by model, overriding the built-in price table.
	Pricing map[string]*Pricing

	// Engines are the engine blocks by label; nil when none was written (the Docker engine, configured by sandbox).
	Engines map[string]*Engine

	// rejected holds "node.<name>" and "var.<name>" for blocks whose label was refused, so that references to
	// them are not reported a second time as undeclared.
	rejected map[string]bool
}

// SourcePath is the path of the configuration file named name in Files and in ranges, relative to the working
// directory when Dir is (for messages and tools that open the file, such as SARIF's artifact locations).
func (c *Config) SourcePath(name string) string {
	return filepath.Join(c.Dir, filepath.FromSlash(name))
}

// Variable is a `variable "name"` block.
type Variable struct {
	Name        string
	Description string
	Type        cty.Type  // cty.DynamicPseudoType when no type was given
	Default     cty.Value // cty.NilVal when there is no default (the variable is required)
	Validations []*VariableValidation
	DeclRange   hcl.Range
}

// VariableValidation is a `validation` block inside a variable.
type VariableValidation struct {
	Condition    hcl.Expression
	ErrorMessage hcl.Expression
	DeclRange    hcl.Range
}

// Local is one attribute of a `locals` block.
type Local struct {
	Name      string
	Expr      hcl.Expression
	DeclRange hcl.Range
}

// Network modes of the sandbox.
const (
	NetworkAllowlist = "allowlist"
	NetworkOpen      = "open"
)

// Sandbox is the `sandbox` block; Load fills defaults so it is never nil.
type Sandbox struct {
	Network          string // NetworkAllowlist (default) or NetworkOpen
	NetworkRange     hcl.Range
	AllowlistNetwork string // default "kew-allowlist"
	PidsLimit        int64  // default 512
	PidsLimitRange   hcl.Range
	Memory           string // "" when unset; e.g. "4g"
	MemoryRange      hcl.Range
	CPUs             string // "" when unset; decimal as written, e.g. "2" or "1.5"
	CPUsRange        hcl.Range
	Image            string // legacy single image: serves claude-code only; "" when unset
	ImageRange       hcl.Range
	Images           map[string]string // runner name -> image reference
	ImageRanges      map[string]hcl.Range
	// Runtime is the container runtime (isolation tier) of every node that does not choose its own, such as
	// "runsc" for gVisor; "" for the engine's default (no --runtime flag).
	Runtime      string
	RuntimeRange hcl.Range
	// TmpfsSize bounds each of the container's two tmpfs mounts (/tmp and /home/agent), as written ("512m");
	// DefaultTmpfsSize when unset. tmpfs pages are memory, so without it one agent could fill the host's.
	TmpfsSize      string
	TmpfsSizeRange hcl.Range
	// Credentials is how nodes get their runner's credentials: CredentialsBrokered (the default: the container
	// holds a placeholder and the egress proxy adds the real value for the runner's endpoint only) or
	// CredentialsForward (the container holds the value). CredentialsExplicit says the block wrote it.
	Credentials         string
	CredentialsRange    hcl.Range
	CredentialsExplicit bool
	// ProtectedBranches are branch patterns no worker may push to, on top of the built-in ones (main, master,
	// trunk, develop, release/*); "*" matches within one path component, "**" across components.
	ProtectedBranches      []string
	ProtectedBranchesRange hcl.Range
	// ResumeFromSalvage makes apply --resume start a worker that runs again from the work kept of it in the run
	// resumed (its commits and uncommitted changes), instead of from its ref; every node's default.
	ResumeFromSalvage bool
	// Egress is the sandbox's egress block; defaults applied when none was written.
	Egress SandboxEgress
	// Retry is the sandbox's retry block, the default of every node; nil when none was written.
	Retry     *Retry
	Budget    *Budget // the default budget of every node; nil when no budget block was written
	DeclRange hcl.Range
}

// SandboxEgress is the sandbox's `egress` block: what allowlist nodes may reach, and through which proxy.
type SandboxEgress struct {
	// Allow are the hosts every node may reach, normalised, sorted and deduplicated.
	Allow      []HostPattern
	AllowRange hcl.Range
	// PrivateHosts are the allowed hosts that may resolve to private ranges (RFC 1918, ULA, CGNAT), for every
	// node: an internal mirror or git server, named one by one. Each is also in Allow.
	PrivateHosts      []HostPattern
	PrivateHostsRange hcl.Range
	// ProxyNetwork is the network through which kewplan's own proxy reaches out (DefaultProxyNetwork).
	ProxyNetwork      string
	ProxyNetworkRange hcl.Range
	// Proxy is an existing forward proxy ("http://host:port") to use instead of kewplan's own; "" for kewplan's.
	Proxy      string
	ProxyRange hcl.Range
	// UpstreamCAFile is a PEM file of certificate authorities, relative to the configuration's directory, that
	// kewplan's proxy trusts (beside the system's roots) for brokered requests and nothing else; "" for none.
	UpstreamCAFile      string
	UpstreamCAFileRange hcl.Range
	// ProviderFetch are the provider-fetch features (ProviderFetchFeatures) every brokered node's requests may
	// use, in the order written, without repeats; ProviderFetchRanges has each entry's range.
	ProviderFetch       []string
	ProviderFetchRanges []hcl.Range
	ProviderFetchRange  hcl.Range
	DeclRange           hcl.Range // empty when no egress block was written
}

// NodeEgress is a node's `egress` block: hosts this node may reach on top of the sandbox's.
type NodeEgress struct {
	Allow      []HostPattern // normalised, sorted, deduplicated
	AllowRange hcl.Range
	// PrivateHosts are this node's hosts that may resolve to private ranges; each is in Allow or the sandbox's.
	PrivateHosts      []HostPattern
	PrivateHostsRange hcl.Range
	// ProviderFetch are the provider-fetch features this node's brokered requests may use on top of the
	// sandbox's, in the order written, without repeats; ProviderFetchRanges has each entry's range.
	ProviderFetch       []string
	ProviderFetchRanges []hcl.Range
	ProviderFetchRange  hcl.Range
	DeclRange           hcl.Range
}

// Runner is a `runner "name"` block: a custom runner, or an override of a built-in's credentials or args.
type Runner struct {
	Name string
	// Protocol is the stdout vocabulary; "" on an override of a built-in (it keeps its own).
	Protocol      string
	ProtocolRange hcl.Range
	// Credentials are names only. nil when the attribute was not written (a built-in keeps its own).
	Credentials      []string
	CredentialRanges []hcl.Range // one per entry of Credentials
	CredentialsRange hcl.Range   // the whole attribute
	// Args is evaluated per node with `model` bound to the node's routed model (see EvalRunnerArgs).
	// nil when the attribute was not written.
	Args hcl.Expression
	// Endpoints are the model API hosts the runner's nodes may reach; nil when the attribute was not written (a
	// built-in keeps its own, runners.Runner.Endpoints).
	Endpoints      []HostPattern
	EndpointsRange hcl.Range
	// BaseURL is the environment variable the agent reads its model API's base URL from, which brokered
	// credentials point at kewplan's proxy; "" when not written (a built-in keeps its own).
	BaseURL      string
	BaseURLRange hcl.Range
	DeclRange    hcl.Range
}

// Roles of a node.
const (
	RoleWorker   = "worker"
	RoleReviewer = "reviewer"
)

// Node is a `node "name"` block. Attribute expressions are evaluated by the caller with EvalContext, because
// they may reference variables and other nodes' outputs that are known only after apply.
type Node struct {
	Name    string
	Runner  hcl.Expression
	Role    hcl.Expression // nil: worker
	Model   hcl.Expression // nil when missing (a planner rule reports it)
	Repo    hcl.Expression
	Ref     hcl.Expression // nil: the remote's default branch
	Branch  hcl.Expression // nil: "kew/<name>"
	Prompt  hcl.Expression
	Timeout hcl.Expression // nil: 60m
	Runtime hcl.Expression // nil: the sandbox's runtime
	// Credentials is the node's credentials mode; nil: the sandbox's.
	Credentials hcl.Expression
	// AllowProtectedPush lets a worker push to a protected branch (see planner.ProtectedBranch); a literal, so
	// no variable can switch it on. AllowProtectedPushRange is the attribute's range when written.
	AllowProtectedPush      bool
	AllowProtectedPushRange hcl.Range
	// ResumeFromSalvage is the node's resume_from_salvage; nil when not written (the sandbox's applies).
	ResumeFromSalvage *bool
	// ForEach and Count are the node's meta-arguments (at most one is set): the node plans one instance per key
	// of ForEach, or Count instances. nil when not written. See EvalExpansion.
	ForEach hcl.Expression
	Count   hcl.Expression
	// DependsOn is the union of explicit depends_on entries and node.<name> references found in any attribute,
	// deduplicated, in source order. Each keeps the range of its first mention.
	DependsOn   []NodeRef
	PullRequest *PullRequest // nil when no pull_request block was written
	Egress      *NodeEgress  // nil when no egress block was written
	// Retry is the node's retry block, replacing the sandbox's attribute by attribute; nil when none was written.
	Retry     *Retry
	Budget    *Budget // nil when no budget block was written (the sandbox's applies)
	DeclRange hcl.Range
	// Attrs keeps every attribute's full range by name, for diagnostics that point at an attribute.
	Attrs map[string]*hcl.Attribute
	// valueDependent is true when an expression of the node reports different errors depending on which values
	// are known (see valueDependent): Config.CheckValues evaluates it even after planning.
	valueDependent bool
	// vars are the references of the node's own expressions, computed once (see variables).
	vars map[hcl.Expression][]hcl.Traversal
}

// ValueDependent reports whether an expression of the node holds a construct whose errors HCL reports or leaves
// out by value (a conditional, && or ||, try() or can()): what callers that let planning's evaluation stand for
// an evaluation with other values still evaluate (see Config.CheckValues).
func (n *Node) ValueDependent() bool { return n.valueDependent }

// NodeRef names another node, with the range where it was named.
type NodeRef struct {
	Name     string
	Range    hcl.Range
	Explicit bool // written in depends_on
	// Whole is true when some reference names the node as a whole (node.fix, values(node.fix), node.fix[*],
	// depends_on = [node.fix], or any use through a local value), so each instance of the referring node depends
	// on every instance of this one. A reference that names an instance (node.fix["api"]) sets Keys instead.
	Whole bool
	// Keys are the instance keys named literally (node.fix["api"], node.shard[2]).
	Keys []cty.Value
	// KeyExprs are index expressions evaluated per instance of the referring node (node.fix[each.key]).
	KeyExprs []hcl.Expression
	// ForEach is true when the referring node's for_each is exactly this node (for_each = node.fix): its
	// instance with key k depends on this node's instance k.
	ForEach bool
}

// PullRequest is a node's optional `pull_request` block.
type PullRequest struct {
	Base      hcl.Expression
	Title     hcl.Expression
	DeclRange hcl.Range
}

// Policy is an organisation `policy` block (see the policy issue); fields are nil/zero when not written.
type Policy struct {
	RequirePinnedImages      bool
	RequirePinnedImagesRange hcl.Range
	// RefuseUnmaskableCredentials makes apply refuse to start when a forwarded credential's value is too short
	// to be masked in logs (planner.RuleCredentialTooShortToMask, otherwise a warning).
	RefuseUnmaskableCredentials      bool
	RefuseUnmaskableCredentialsRange hcl.Range
	// RequireBrokeredCredentials refuses a node whose container would hold its credentials (mode forward).
	RequireBrokeredCredentials      bool
	RequireBrokeredCredentialsRange hcl.Range
	AllowedNetworks                 []string
	AllowedNetworksRange            hcl.Range
	AllowedImagePrefixes            []string
	AllowedImagePrefixRange         hcl.Range
	Credentials                     map[string][]string // credential name -> runners allowed to receive it
	CredentialsRange                hcl.Range
	MaxPidsLimit                    int64 // 0: no limit set
	MaxPidsLimitRange               hcl.Range
	RequiredRuntime                 string // "": any runtime; else every node must run on it (e.g. "runsc")
	RequiredRuntimeRange            hcl.Range
	// AllowedEgress bounds every node's egress list: each host a node may reach must fall under one of these
	// patterns (rule policy-egress). nil when not written.
	AllowedEgress      []HostPattern
	AllowedEgressRange hcl.Range
	// AllowedRepositories bounds the repositories a worker may push to: each worker's repository (as
	// "host/path", without scheme, credentials or ".git") must match one of these patterns (rule policy-push).
	// nil when not written.
	AllowedRepositories      []string
	AllowedRepositoriesRange hcl.Range
	// AllowedBranches bounds the branches a worker may push to (rule policy-push); nil when not written.
	AllowedBranches      []string
	AllowedBranchesRange hcl.Range
	// ProviderFetch bounds the provider-fetch features (ProviderFetchFeatures) any node may opt in to (rule
	// policy-provider-fetch); empty allows none, nil (not written) leaves the check off. A node whose
	// credentials are forwarded can use every feature, so it breaks any list that lacks one.
	ProviderFetch      []string
	ProviderFetchRange hcl.Range
	// ForbidPrivateHosts refuses every private_hosts entry: no node may reach a host on a private address.
	ForbidPrivateHosts      bool
	ForbidPrivateHostsRange hcl.Range
	// Approvals asks for signed approvals of a saved plan before apply runs it; nil when not written.
	Approvals *Approvals
	// Rules are the policy's rule blocks in source order (package policyrules evaluates them).
	Rules     []*PolicyRule
	DeclRange hcl.Range
}

// NodeOutputNames are the attributes of node.<name> that other nodes may reference. At plan time they are
// unknown; apply fills them once the upstream node finished.
var NodeOutputNames = []string{"commit", "branch", "status", "verdict", "session_id"}

// NodePlanAttributeNames are the attributes of node.<name> known at plan time, which the planner fills in from
// the node's own evaluation (each.value.repo in a for_each over another node's instances).
var NodePlanAttributeNames = []string{"repo"}

// nodeAttributeNames are every attribute a reference to a node (or one of its instances) may read.
var nodeAttributeNames = append(append([]string(nil), NodeOutputNames...), NodePlanAttributeNames...)
