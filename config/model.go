package config

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Config is one configuration: every *.hcl file of a directory (not recursive), or a single file.
// Expressions are kept unevaluated; see EvalContext.
type Config struct {
	// Dir is the directory that file() and templatefile() paths are relative to.
	Dir string
	// Files holds the source of every configuration file by the name used in diagnostics ranges,
	// for snippets and for the config digest. Names are relative to the working directory as given.
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

	// Engines are the engine blocks by label; nil when none was written (the Docker engine, configured by sandbox).
	Engines map[string]*Engine

	// rejected holds "node.<name>" and "var.<name>" for blocks whose label was refused, so that references to
	// them are not reported a second time as undeclared.
	rejected map[string]bool
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
	DeclRange        hcl.Range
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
	Args      hcl.Expression
	DeclRange hcl.Range
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
	// DependsOn is the union of explicit depends_on entries and node.<name> references found in any attribute,
	// deduplicated, in source order. Each keeps the range of its first mention.
	DependsOn   []NodeRef
	PullRequest *PullRequest // nil when no pull_request block was written
	DeclRange   hcl.Range
	// Attrs keeps every attribute's full range by name, for diagnostics that point at an attribute.
	Attrs map[string]*hcl.Attribute
}

// NodeRef names another node, with the range where it was named.
type NodeRef struct {
	Name     string
	Range    hcl.Range
	Explicit bool // written in depends_on
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
	AllowedNetworks          []string
	AllowedNetworksRange     hcl.Range
	AllowedImagePrefixes     []string
	AllowedImagePrefixRange  hcl.Range
	Credentials              map[string][]string // credential name -> runners allowed to receive it
	CredentialsRange         hcl.Range
	MaxPidsLimit             int64 // 0: no limit set
	MaxPidsLimitRange        hcl.Range
	DeclRange                hcl.Range
}

// NodeOutputNames are the attributes of node.<name> that other nodes may reference. At plan time they are
// unknown; apply fills them once the upstream node finished.
var NodeOutputNames = []string{"commit", "branch", "status", "verdict", "session_id"}
