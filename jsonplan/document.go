package jsonplan

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/internal/jsonstream"
	"github.com/kewplan/kewplan/internal/parallel"
	"github.com/kewplan/kewplan/internal/strictjson"
	"github.com/kewplan/kewplan/internal/termsafe"
	"github.com/kewplan/kewplan/planner"
)

// FormatVersion is the version of the document's shape (saved plans and `plan --json`). A major change is a
// breaking change for `kewplan diff` and `kewplan apply PLANFILE`.
const FormatVersion = "1.0"

// Document is the JSON plan (`kewplan plan --json`) and, with Saved set, a saved plan (`--out FILE`): the saved
// plan is a superset, so `kewplan diff` and `kewplan show` read either. The keys are stable within a major
// FormatVersion; the document holds no timestamp and no absolute host path, so it is byte-identical across runs
// and machines for the same configuration and inputs.
type Document struct {
	FormatVersion  string `json:"format_version"`
	KewplanVersion string `json:"kewplan_version"`
	ConfigDigest   string `json:"config_digest"`
	// Engine is the engine the plan runs on, "docker" or "kubernetes"; absent in plans written before engines
	// existed, which are Docker plans.
	Engine string `json:"engine,omitempty"`
	// Kubernetes is, on the kubernetes engine, the rendered objects and the engine block's settings.
	Kubernetes *Kubernetes         `json:"kubernetes,omitempty"`
	Nodes      []NodeDocument      `json:"nodes"`
	Exposure   map[string][]string `json:"exposure"`
	// Budget is the apply-wide cap and worst case; nil in a document written before budgets existed.
	Budget *ApplyBudgetDocument `json:"budget"`
	// Diagnostics are in the shape `kewplan validate --json` prints.
	Diagnostics Diagnostics `json:"diagnostics"`
	Saved       *SavedState `json:"saved,omitempty"`
	// ConfigDir is the configuration's directory relative to the working directory the plan was made in (forward
	// slashes, "." for that directory itself), so that tools reading the plan later (diff's SARIF) can map the
	// file names of ranges, which are relative to the configuration's directory, back to repository paths.
	// Empty when the configuration was outside the working directory; never an absolute path, so plans stay
	// the same wherever they were made.
	ConfigDir string `json:"config_dir,omitempty"`
	// Resume is present when the plan is applied with --resume: which nodes reuse a previous run's outputs.
	Resume *ResumeDocument `json:"resume,omitempty"`
}

// ResumeDocument is a ResumePlan: for every node, reuse or run, and why.
type ResumeDocument struct {
	FromRun string               `json:"from_run"`
	Reused  int                  `json:"reused"`
	Run     int                  `json:"run"`
	Nodes   []ResumeNodeDocument `json:"nodes"`
}

// ResumeNodeDocument is one node's resume decision.
type ResumeNodeDocument struct {
	Node    string `json:"node"`
	Action  string `json:"action"` // "reuse" or "run"
	Reason  string `json:"reason"`
	FromRun string `json:"from_run,omitempty"` // the run whose outputs are reused
	// FromSalvage is set when the node runs from the work kept of it in the run resumed.
	FromSalvage *planner.SalvageStart `json:"from_salvage,omitempty"`
}

// NewResumeDocument converts a resume plan; nil for nil.
func NewResumeDocument(rp *planner.ResumePlan) *ResumeDocument {
	if rp == nil {
		return nil
	}
	d := &ResumeDocument{FromRun: rp.FromRun, Nodes: make([]ResumeNodeDocument, 0, len(rp.Decisions))}
	for _, dec := range rp.Decisions {
		d.Nodes = append(d.Nodes, ResumeNodeDocument{Node: dec.Node, Action: dec.Action, Reason: dec.Reason, FromRun: dec.FromRun,
			FromSalvage: dec.FromSalvage})
		if dec.Action == planner.ResumeReuse {
			d.Reused++
		} else {
			d.Run++
		}
	}
	return d
}

// NodeDocument is one node of a Document.
type NodeDocument struct {
	Name      string `json:"name"`
	Runner    string `json:"runner"`
	Protocol  string `json:"protocol"`
	Role      string `json:"role"`
	Image     string `json:"image"`
	Network   string `json:"network"`
	Runtime   string `json:"runtime"`   // "" for the engine's default runtime
	Isolation string `json:"isolation"` // the runtime for people: "gVisor (runsc)"
	Model     string `json:"model"`
	// Repository is the node's repository URL with any user, password or query masked ("https://***@…"); ""
	// when it is known only after apply (Unknown lists "repo").
	Repository string `json:"repository"`
	// Ref is the ref the node is cloned at; "" for the remote's default branch.
	Ref string `json:"ref"`
	// Push is where a worker's commits go; nil for a reviewer, which pushes nothing.
	Push              *PushDocument `json:"push"`
	Credentials       []string      `json:"credentials"`
	CredentialOrigins []string      `json:"credential_origins"`
	// CredentialMode is "brokered" (the container holds placeholders; the egress proxy adds the values for
	// BrokeredEndpoints only) or "forward" (the container holds the values); "" for a node without credentials.
	CredentialMode string `json:"credential_mode,omitempty"`
	// CredentialModes is the mode of each credential, by name.
	CredentialModes map[string]string `json:"credential_modes,omitempty"`
	// BrokeredEndpoints are the hosts for which the proxy adds a brokered node's credentials.
	BrokeredEndpoints []string `json:"brokered_endpoints,omitempty"`
	// BrokeredPaths are the methods and paths ("POST /v1/messages") the proxy forwards for a brokered node; every
	// other request through its broker is refused.
	BrokeredPaths []string `json:"brokered_paths,omitempty"`
	// BaseURLVariable is the variable a brokered node's agent reads its API base URL from, set to the proxy.
	BaseURLVariable string `json:"base_url_variable,omitempty"`
	// PrivateHosts are the node's egress entries whose names may resolve to private addresses (RFC 1918, ULA,
	// CGNAT), sorted; omitted when none is.
	PrivateHosts []string `json:"private_hosts,omitempty"`
	// ProviderFetch are the provider-fetch features the node's model requests may make the provider fetch with
	// on its agent's behalf (web_search, web_fetch, code_execution, mcp_servers, url_sources), sorted: a brokered
	// node's provider_fetch, which kewplan's broker enforces, or every feature for a node whose container holds
	// its credentials. Omitted for none.
	ProviderFetch []string `json:"provider_fetch,omitempty"`
	// Egress are the hosts the node may reach through the egress proxy, sorted by host and port; empty for an
	// open node (its network says it reaches any host) and for an allowlist node that reaches none.
	Egress      []EgressHostDocument `json:"egress"`
	DependsOn   []string             `json:"depends_on"`
	Prompt      PromptDocument       `json:"prompt"`
	Argv        []string             `json:"argv"`
	Unknown     []string             `json:"unknown"`
	PidsLimit   int64                `json:"pids_limit"`
	Memory      string               `json:"memory"`
	CPUs        string               `json:"cpus"`
	TmpfsSize   string               `json:"tmpfs_size"`
	Range       *Range               `json:"range"`
	Errors      bool                 `json:"errors,omitempty"`
	PullRequest *PullRequestDoc      `json:"pull_request,omitempty"`
	// Budget is the node's caps; nil in a document written before budgets existed.
	Budget *BudgetDocument `json:"budget"`
	// Retry is present when a retry block applies to the node; absent means one attempt, no retry.
	Retry *RetryDocument `json:"retry,omitempty"`
	// Instance is set for an instance of a node with for_each or count; Name is then its address.
	Instance *InstanceDoc `json:"instance,omitempty"`
}

// InstanceDoc says which node block and key an instance comes from, and the slug its container, branch and
// files are named after.
type InstanceDoc struct {
	Node string `json:"node"`
	// Key is a string (for_each) or a number (count).
	Key  any    `json:"key"`
	Slug string `json:"slug"`
}

// EgressHostDocument is one host of a node's egress list: {"host": "api.anthropic.com", "port": 443, "origins":
// ["runner"]}. host is a name or a "*.suffix" wildcard; origins name each of runner, sandbox and node that allow it.
type EgressHostDocument struct {
	Host    string   `json:"host"`
	Port    int      `json:"port"`
	Origins []string `json:"origins"`
}

// EgressHosts converts a document's egress list back to the plan's (views and the diff describe it alike).
func (n *NodeDocument) EgressHosts() []planner.EgressHost {
	out := make([]planner.EgressHost, 0, len(n.Egress))
	for _, e := range n.Egress {
		out = append(out, planner.EgressHost{Host: e.Host, Port: e.Port, Origins: nonNil(e.Origins)})
	}
	return out
}

// RetryDocument is a node's effective retry policy under the configuration's attribute names, with where each
// attribute came from ("default", "sandbox file:line" or "node file:line").
type RetryDocument struct {
	Attempts int               `json:"attempts"`
	Backoff  string            `json:"backoff"`
	On       []string          `json:"on"`
	Origin   map[string]string `json:"origin"`
}

// NewRetryDocument converts a policy; nil when no retry block applies.
func NewRetryDocument(r planner.RetryPolicy) *RetryDocument {
	if !r.Configured() {
		return nil
	}
	origin := make(map[string]string, len(r.Origins))
	for k, v := range r.Origins {
		origin[k] = v
	}
	return &RetryDocument{Attempts: r.Attempts, Backoff: config.FormatDuration(r.Backoff), On: nonNil(r.On), Origin: origin}
}

// PromptDocument describes the prompt by digest; an unknown prompt has sha256 "" and bytes 0.
type PromptDocument struct {
	SHA256 string `json:"sha256"`
	Bytes  int    `json:"bytes"`
}

// PushDocument is where a worker's commits go: the branch of its repository, the pull request it opens, and the
// branches it may not push to.
type PushDocument struct {
	// Branch is "" when it is known only after apply (the node's Unknown lists "branch").
	Branch      string          `json:"branch"`
	PullRequest *PullRequestDoc `json:"pull_request"`
	// Protected is true when Branch is a protected branch, which the node may push to because it sets
	// allow_protected_push (otherwise the plan refuses it).
	Protected bool `json:"protected"`
	// AllowProtectedPush is the node's allow_protected_push.
	AllowProtectedPush bool `json:"allow_protected_push"`
	// ProtectedBranches are the branch patterns the node may not push to; the broker checks them again at
	// apply, with the remote's default branch.
	ProtectedBranches []string `json:"protected_branches"`
}

// PullRequestDoc is a node's evaluated pull_request block.
type PullRequestDoc struct {
	Base  string `json:"base"`
	Title string `json:"title"`
}

// NewRange converts an hcl range; nil for the zero range.
func NewRange(r hcl.Range) *Range {
	if r.Filename == "" {
		return nil
	}
	return &Range{
		Filename: filepath.ToSlash(r.Filename),
		Start:    Pos{Line: r.Start.Line, Column: r.Start.Column, Byte: r.Start.Byte},
		End:      Pos{Line: r.End.Line, Column: r.End.Column, Byte: r.End.Byte},
	}
}

// WriteIndented writes d as encoding/json encodes it indented by two spaces, HTML characters unescaped, with a
// final newline; the nodes are encoded in parallel batches and streamed in order (jsonstream.IndentedList), so a
// large plan's text is never held whole. plan --json, saved plans and their nodes digest all write it so.
func (d *Document) WriteIndented(w io.Writer) error {
	if d.Nodes == nil {
		return jsonstream.Indented(w, d) // "nodes": null, which the stream has no empty list to splice into
	}
	c := *d
	c.Nodes = []NodeDocument{}
	return jsonstream.IndentedList(w, &c, "nodes", len(d.Nodes), func(i int) any { return &d.Nodes[i] })
}

// NewDocument converts a plan into its JSON document, with its diagnostics (files, name -> source, gives their
// snippets; several maps are merged), without an engine (SetEngine) and without Saved.
func NewDocument(p *planner.Plan, kewplanVersion string, files ...map[string][]byte) *Document {
	d := &Document{
		FormatVersion:  FormatVersion,
		KewplanVersion: kewplanVersion,
		ConfigDigest:   p.ConfigDigest,
		Nodes:          make([]NodeDocument, len(p.Nodes)),
		Exposure:       map[string][]string{},
		Diagnostics:    NewDiagnostics(p.Diagnostics, files...),
	}
	d.Budget = newApplyBudgetDocument(p.Budget)
	for c, nodes := range p.Exposure {
		d.Exposure[c] = append([]string{}, nodes...)
	}
	// Each node's document is its own: they are built side by side.
	parallel.For(len(p.Nodes), func(i int) { d.Nodes[i] = newNodeDocument(p.Nodes[i]) })
	return d
}

// newNodeDocument is one node of the plan document.
func newNodeDocument(np *planner.NodePlan) NodeDocument {
	nd := NodeDocument{
		Name:              np.Name,
		Runner:            np.Runner,
		Protocol:          np.Protocol,
		Role:              np.Role,
		Image:             np.Image,
		Network:           np.Network,
		Runtime:           np.Runtime,
		Isolation:         planner.IsolationTier(np.Runtime),
		Model:             np.Model,
		Credentials:       nonNil(np.Credentials),
		CredentialOrigins: nonNil(np.CredentialOrigins),
		DependsOn:         nonNil(np.DependsOn),
		Prompt:            PromptDocument{SHA256: np.Prompt.SHA256, Bytes: np.Prompt.Bytes},
		Argv:              []string{},
		Unknown:           nonNil(np.Unknown),
		PidsLimit:         np.PidsLimit,
		Memory:            np.Memory,
		CPUs:              np.CPUs,
		TmpfsSize:         np.TmpfsSize,
		Egress:            egressDocuments(np.Egress),
		PrivateHosts:      np.PrivateHosts,
		ProviderFetch:     slices.Clone(np.ProviderFetch),
		Range:             NewRange(np.DeclRange),
		Errors:            np.Errors,
		Retry:             NewRetryDocument(np.Retry),
	}
	if slices.Contains(np.Unknown, "runtime") {
		nd.Isolation = planner.UnknownValue
	}
	if np.PullRequest != nil {
		nd.PullRequest = &PullRequestDoc{Base: np.PullRequest.Base, Title: np.PullRequest.Title}
	}
	nd.Repository, nd.Ref = planner.MaskURL(np.Repo), np.Ref
	if np.Pushes() || slices.Contains(np.Unknown, "role") {
		push := &PushDocument{PullRequest: nd.PullRequest, AllowProtectedPush: np.AllowProtectedPush,
			ProtectedBranches: nonNil(np.ProtectedBranches)}
		if !slices.Contains(np.Unknown, "branch") {
			push.Branch = np.Branch
			_, push.Protected = planner.ProtectedBranchPattern(np.ProtectedBranches, np.Branch)
		}
		nd.Push = push
	}
	if np.CredentialMode != "" && len(np.Credentials) > 0 {
		nd.CredentialMode = np.CredentialMode
		nd.CredentialModes = make(map[string]string, len(np.Credentials))
		for _, c := range np.Credentials {
			nd.CredentialModes[c] = np.CredentialMode
		}
		nd.BrokeredEndpoints = slices.Clone(np.BrokeredEndpoints)
		for _, p := range np.BrokeredPaths {
			nd.BrokeredPaths = append(nd.BrokeredPaths, p.Method+" "+p.Path)
		}
		nd.BaseURLVariable = np.BaseURLVar
	}
	if c := np.Container; c != nil {
		nd.Argv = c.Argv()
	}
	if np.Key != cty.NilVal && np.Key.IsKnown() {
		inst := &InstanceDoc{Node: np.Block, Slug: np.Slug}
		if np.Key.Type() == cty.Number {
			i, _ := np.Key.AsBigFloat().Int64()
			inst.Key = i
		} else {
			inst.Key = np.Key.AsString()
		}
		nd.Instance = inst
	}
	nd.Budget = newBudgetDocument(np.Budget)
	return nd
}

func egressDocuments(hosts []planner.EgressHost) []EgressHostDocument {
	out := make([]EgressHostDocument, 0, len(hosts))
	for _, h := range hosts {
		out = append(out, EgressHostDocument{Host: h.Host, Port: h.Port, Origins: nonNil(h.Origins)})
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return append([]string{}, s...)
}

// Node returns the named node of the document, or nil.
func (d *Document) Node(name string) *NodeDocument {
	for i := range d.Nodes {
		if d.Nodes[i].Name == name {
			return &d.Nodes[i]
		}
	}
	return nil
}

// HasErrors reports whether any diagnostic of the document is an error.
func (d *Document) HasErrors() bool {
	for _, dg := range d.Diagnostics {
		if !dg.Unreadable && strings.EqualFold(dg.Severity, SeverityError) {
			return true
		}
	}
	for _, n := range d.Nodes {
		if n.Errors {
			return true
		}
	}
	return false
}

// Check reports a document this version of kewplan cannot read.
func (d *Document) Check() error {
	major, _, _ := strings.Cut(d.FormatVersion, ".")
	want, _, _ := strings.Cut(FormatVersion, ".")
	if d.FormatVersion == "" {
		return fmt.Errorf("not a kewplan plan: it has no format_version")
	}
	if major != want {
		return fmt.Errorf("plan format %s is not supported: this kewplan reads format %s.x", termsafe.String(d.FormatVersion), want)
	}
	return nil
}

// DecodeError is Decode's error for bytes that are not one JSON plan document (bad JSON, a wrong type, a second
// value); Err is encoding/json's error, which callers may place in the bytes.
type DecodeError struct{ Err error }

func (e *DecodeError) Error() string { return e.Err.Error() }
func (e *DecodeError) Unwrap() error { return e.Err }

// Decode reads one plan document from data, strictly (internal/strictjson: a duplicate key, a key differing from
// a field's only by case and an unknown field are refused with their JSON path): a *DecodeError when data is not
// one JSON document of this shape, else Check's error when this version cannot read its format. The caller bounds data's size and nesting first
// (jsonlimit). A saved object's variables are never nil.
func Decode(data []byte) (*Document, error) {
	var doc Document
	if err := strictjson.Decode(data, &doc); err != nil {
		return nil, &DecodeError{Err: err}
	}
	if err := doc.Check(); err != nil {
		return nil, err
	}
	if doc.Saved != nil && doc.Saved.Variables == nil {
		doc.Saved.Variables = map[string]json.RawMessage{}
	}
	return &doc, nil
}
