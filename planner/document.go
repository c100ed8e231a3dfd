package planner

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// Document is the JSON plan (`kewplan plan --json`) and, with Saved set, a saved plan (`--out FILE`): the saved
// plan is a superset, so `kewplan diff` and `kewplan show` read either. The keys are stable within a major
// FormatVersion; the document holds no timestamp and no absolute host path, so it is byte-identical across runs
// and machines for the same configuration and inputs.
type Document struct {
	FormatVersion  string              `json:"format_version"`
	KewplanVersion string              `json:"kewplan_version"`
	ConfigDigest   string              `json:"config_digest"`
	Nodes          []NodeDocument      `json:"nodes"`
	Exposure       map[string][]string `json:"exposure"`
	// Budget is the apply-wide cap and worst case; nil in a document written before budgets existed.
	Budget *ApplyBudgetDocument `json:"budget"`
	// Diagnostics are in the shape `kewplan validate --json` prints (views.DiagnosticsJSON writes them); the
	// planner keeps them raw so that shape has a single owner.
	Diagnostics []json.RawMessage `json:"diagnostics"`
	Saved       *SavedState       `json:"saved,omitempty"`
}

// NodeDocument is one node of a Document.
type NodeDocument struct {
	Name              string          `json:"name"`
	Runner            string          `json:"runner"`
	Protocol          string          `json:"protocol"`
	Role              string          `json:"role"`
	Image             string          `json:"image"`
	Network           string          `json:"network"`
	Model             string          `json:"model"`
	Credentials       []string        `json:"credentials"`
	CredentialOrigins []string        `json:"credential_origins"`
	DependsOn         []string        `json:"depends_on"`
	Prompt            PromptDocument  `json:"prompt"`
	Argv              []string        `json:"argv"`
	Unknown           []string        `json:"unknown"`
	PidsLimit         int64           `json:"pids_limit"`
	Memory            string          `json:"memory"`
	CPUs              string          `json:"cpus"`
	Range             *RangeDocument  `json:"range"`
	Errors            bool            `json:"errors,omitempty"`
	PullRequest       *PullRequestDoc `json:"pull_request,omitempty"`
	// Budget is the node's caps; nil in a document written before budgets existed.
	Budget *BudgetDocument `json:"budget"`
}

// PromptDocument describes the prompt by digest; an unknown prompt has sha256 "" and bytes 0.
type PromptDocument struct {
	SHA256 string `json:"sha256"`
	Bytes  int    `json:"bytes"`
}

// PullRequestDoc is a node's evaluated pull_request block.
type PullRequestDoc struct {
	Base  string `json:"base"`
	Title string `json:"title"`
}

// RangeDocument is a source range: the same shape as a diagnostic's range.
type RangeDocument struct {
	Filename string      `json:"filename"`
	Start    PosDocument `json:"start"`
	End      PosDocument `json:"end"`
}

// PosDocument is a position in a source file.
type PosDocument struct {
	Line   int `json:"line"`
	Column int `json:"column"`
	Byte   int `json:"byte"`
}

// NewRangeDocument converts an hcl range; nil for the zero range.
func NewRangeDocument(r hcl.Range) *RangeDocument {
	if r.Filename == "" {
		return nil
	}
	return &RangeDocument{
		Filename: filepath.ToSlash(r.Filename),
		Start:    PosDocument{Line: r.Start.Line, Column: r.Start.Column, Byte: r.Start.Byte},
		End:      PosDocument{Line: r.End.Line, Column: r.End.Column, Byte: r.End.Byte},
	}
}

// NewDocument converts a plan into its JSON document, without diagnostics (the caller adds them in the validate
// shape) and without Saved.
func NewDocument(p *Plan, kewplanVersion string) *Document {
	d := &Document{
		FormatVersion:  p.FormatVersion,
		KewplanVersion: kewplanVersion,
		ConfigDigest:   p.ConfigDigest,
		Nodes:          make([]NodeDocument, 0, len(p.Nodes)),
		Exposure:       map[string][]string{},
		Diagnostics:    []json.RawMessage{},
	}
	d.Budget = newApplyBudgetDocument(p.Budget)
	for c, nodes := range p.Exposure {
		d.Exposure[c] = append([]string{}, nodes...)
	}
	for _, np := range p.Nodes {
		nd := NodeDocument{
			Name:              np.Name,
			Runner:            np.Runner,
			Protocol:          np.Protocol,
			Role:              np.Role,
			Image:             np.Image,
			Network:           np.Network,
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
			Range:             NewRangeDocument(np.DeclRange),
			Errors:            np.Errors,
		}
		if np.PullRequest != nil {
			nd.PullRequest = &PullRequestDoc{Base: np.PullRequest.Base, Title: np.PullRequest.Title}
		}
		if c := np.Container; c != nil {
			nd.Argv = c.Argv()
		}
		nd.Budget = newBudgetDocument(np.Budget)
		d.Nodes = append(d.Nodes, nd)
	}
	return d
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
	for _, raw := range d.Diagnostics {
		var sev struct {
			Severity string `json:"severity"`
		}
		if json.Unmarshal(raw, &sev) == nil && strings.EqualFold(sev.Severity, SeverityError) {
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
		return fmt.Errorf("plan format %s is not supported: this kewplan reads format %s.x", d.FormatVersion, want)
	}
	return nil
}
