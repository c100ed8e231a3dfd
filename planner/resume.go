package planner

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/kewplan/kewplan/config"
)

// FingerprintVersion changes when what a fingerprint covers changes; a recorded fingerprint of another version
// never matches, so the node runs again rather than being reused on a comparison that means something else.
const FingerprintVersion = 1

// UpstreamOutputs are the outputs of a node's dependencies that its fingerprint covers. session_id and status
// are left out: a re-run upstream node that produced the same commit, branch and verdict hands its dependants
// the same work.
var UpstreamOutputs = []string{"commit", "branch", "verdict"}

// InputFingerprint is what a node's run depended on, one digest per component so that a resume can say which
// one changed. The executor records it with every node it runs (the rendered NodePlan after re-planning with
// the upstream outputs); `apply --resume` compares it with the new plan's to decide what to reuse.
type InputFingerprint struct {
	Version int `json:"v"`
	// Container covers the rendered container configuration except the image: limits, network, mounts, the
	// credential names, the container args (model included). Placeholders stand for the run and the checkout.
	Container string `json:"container"`
	Image     string `json:"image"`    // the image reference as planned
	ImageID   string `json:"image_id"` // the engine's image id when known (apply time), else ""
	Prompt    string `json:"prompt"`   // the prompt's sha256
	Repo      string `json:"repo"`
	Ref       string `json:"ref"`
	Branch    string `json:"branch"`
	Upstream  string `json:"upstream"` // the dependencies' UpstreamOutputs
}

// Digest is one "sha256:<hex>" over every component.
func (f InputFingerprint) Digest() string {
	b, _ := json.Marshal(f) // a struct of strings and an int always encodes
	return "sha256:" + SHA256Hex(b)
}

// Fingerprint computes a node's input fingerprint from its rendered plan and the outputs of its dependencies
// (node name -> output name -> value, as Inputs.Outputs). ok is false when the node cannot be fingerprinted:
// it has errors, or values known only after apply. imageID is the engine's id of the image, "" at plan time.
func Fingerprint(np *NodePlan, upstream map[string]map[string]cty.Value, imageID string) (f InputFingerprint, ok bool) {
	if np == nil || np.Container == nil || len(np.Unknown) > 0 || !np.Prompt.Known() {
		return InputFingerprint{}, false
	}
	c := *np.Container
	c.Image = ""
	c.RunID, c.Checkout = RunPlaceholder, CheckoutPlaceholder
	f = InputFingerprint{
		Version:   FingerprintVersion,
		Container: digestOf(c.Argv()),
		Image:     np.Container.Image,
		ImageID:   imageID,
		Prompt:    np.Prompt.SHA256,
		Repo:      digestOf(np.Repo),
		Ref:       digestOf(np.Ref),
		Branch:    digestOf(np.Branch),
	}
	deps := slices.Sorted(slices.Values(np.DependsOn))
	var up [][]string
	for _, d := range deps {
		row := []string{d}
		for _, name := range UpstreamOutputs {
			row = append(row, ctyString(upstream[d][name]))
		}
		up = append(up, row)
	}
	f.Upstream = digestOf(up)
	return f, true
}

func digestOf(v any) string {
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// ctyString is a known string value, or "" for anything else (absent, null, unknown, not a string).
func ctyString(v cty.Value) string {
	if v == cty.NilVal || v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
		return ""
	}
	v, _ = v.Unmark()
	return v.AsString()
}

// changes names what differs between a recorded fingerprint and a new one, in the order a reader checks them.
func (f InputFingerprint) changes(old InputFingerprint) []string {
	if old.Version != f.Version {
		return []string{"recorded by another kewplan version"}
	}
	var out []string
	if f.Image != old.Image || f.ImageID != "" && old.ImageID != "" && f.ImageID != old.ImageID {
		out = append(out, "image changed")
	}
	for _, c := range []struct {
		now, then, what string
	}{
		{f.Container, old.Container, "container configuration changed"},
		{f.Prompt, old.Prompt, "prompt changed"},
		{f.Repo, old.Repo, "repo changed"},
		{f.Ref, old.Ref, "ref changed"},
		{f.Branch, old.Branch, "branch changed"},
		{f.Upstream, old.Upstream, "upstream commit changed"},
	} {
		if c.now != c.then {
			out = append(out, c.what)
		}
	}
	return out
}

// ReusableStatuses are the recorded statuses whose outputs a resume may reuse: a worker that succeeded and a
// reviewer that approved ("reused" is how a resumed run records a node it took from an earlier one).
var ReusableStatuses = []string{"succeeded", "approved", "reused"}

// PreviousNode is what a previous run recorded about a node, as a resume needs it.
type PreviousNode struct {
	Status string
	// Fingerprint is the recorded input fingerprint; nil when the run recorded none (an older kewplan).
	Fingerprint *InputFingerprint
	// Outputs are the node's recorded outputs by config.NodeOutputNames ("commit", "branch", "verdict", …).
	Outputs map[string]string
	// Pushed is true when the node pushed Outputs["branch"]; BranchHead is where that branch points now on the
	// remote ("" when it is gone). BranchChecked is false when nobody looked (then the check is skipped).
	Pushed        bool
	BranchChecked bool
	BranchHead    string
	// ReusedFrom is the run this node's outputs were themselves reused from, when the previous run was a resume.
	ReusedFrom string
	// Salvage is the work the run kept of the node (a worker stopped before its push); nil when none is on disk.
	Salvage *SalvageStart
}

// SalvageStart is kept work a resumed worker starts from: the bundle of run Run, cloned at BaseCommit and checked
// out at Commit (the host's commit of the uncommitted changes, else the agent's head).
type SalvageStart struct {
	Run        string `json:"run"`
	Bundle     string `json:"-"` // a host path: not in the plan document
	BaseCommit string `json:"base_commit"`
	Commit     string `json:"commit"`
	// Summary is what was kept, for people: "3 commits, 2 files changed, 14 kB".
	Summary string `json:"summary"`
}

// PreviousRun is a recorded run a resume starts from.
type PreviousRun struct {
	ID    string
	Nodes map[string]*PreviousNode
}

// Resume actions.
const (
	ResumeReuse = "reuse"
	ResumeRun   = "run"
)

// ResumeDecision says whether a node's recorded outputs are reused or the node runs, and why.
type ResumeDecision struct {
	Node   string
	Action string // ResumeReuse or ResumeRun
	// Reason is "reused from RUN", or why the node runs: "prompt changed", "failed in RUN", "not in RUN", …
	Reason string
	// FromRun is the run whose outputs are reused (the original one, when that run had reused them too).
	FromRun string
	// Outputs are the reused outputs, which feed the dependants (nil when the node runs).
	Outputs map[string]string
	// Fingerprint is the node's fingerprint in the new plan, when it could be computed.
	Fingerprint *InputFingerprint
	// FromSalvage is set when the node runs from the work kept of it in the run resumed (its resume_from_salvage).
	FromSalvage *SalvageStart
}

// DecideNode decides one node: np is its new plan rendered with its dependencies' outputs, upstream those
// outputs (as for Fingerprint), prev what runID recorded about it (nil when the node was not in that run).
func DecideNode(np *NodePlan, upstream map[string]map[string]cty.Value, runID string, prev *PreviousNode) ResumeDecision {
	d := ResumeDecision{Node: np.Name, Action: ResumeRun}
	fp, ok := Fingerprint(np, upstream, "")
	if ok {
		d.Fingerprint = &fp
	}
	switch {
	case prev == nil:
		d.Reason = "not in " + runID
	case !slices.Contains(ReusableStatuses, prev.Status):
		d.Reason = describeRecordedStatus(prev.Status) + " in " + runID
	case !ok:
		d.Reason = "its inputs are known only after it runs"
	case prev.Fingerprint == nil:
		d.Reason = "no input fingerprint recorded in " + runID
	default:
		if ch := fp.changes(*prev.Fingerprint); len(ch) > 0 {
			d.Reason = strings.Join(ch, ", ")
			break
		}
		if why := branchMoved(prev); why != "" {
			d.Reason = why
			break
		}
		d.Action, d.FromRun, d.Outputs = ResumeReuse, runID, prev.Outputs
		if prev.ReusedFrom != "" {
			d.FromRun = prev.ReusedFrom
		}
		d.Reason = "reused from " + d.FromRun
	}
	if d.Action == ResumeRun && np.ResumeFromSalvage && np.Pushes() && prev != nil && prev.Salvage != nil {
		d.FromSalvage = prev.Salvage
		d.Reason += "; starts from the work kept in " + prev.Salvage.Run + " (" + prev.Salvage.Summary + ")"
	}
	return d
}

// branchMoved says why a pushed branch no longer carries the recorded commit, or "".
func branchMoved(prev *PreviousNode) string {
	if !prev.Pushed || !prev.BranchChecked {
		return ""
	}
	branch, commit := prev.Outputs["branch"], prev.Outputs["commit"]
	switch {
	case prev.BranchHead == "":
		return fmt.Sprintf("branch %s no longer exists on the remote", branch)
	case prev.BranchHead != commit:
		return fmt.Sprintf("branch %s moved from the recorded commit %s to %s", branch, shortCommit(commit), shortCommit(prev.BranchHead))
	}
	return ""
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

// describeRecordedStatus words a recorded status for "… in RUN".
func describeRecordedStatus(status string) string {
	switch status {
	case "timed_out":
		return "timed out"
	case "changes_requested":
		return "requested changes"
	case "rejected":
		return "rejected the change"
	case "running":
		return "did not finish"
	case "":
		return "has no status"
	}
	return status // failed, cancelled, held, skipped, abandoned, …
}

// ResumePlan is the decision for every node of a plan.
type ResumePlan struct {
	FromRun   string
	Decisions []ResumeDecision // plan order
}

// Decision returns the named node's decision, or nil.
func (r *ResumePlan) Decision(name string) *ResumeDecision {
	for i := range r.Decisions {
		if r.Decisions[i].Node == name {
			return &r.Decisions[i]
		}
	}
	return nil
}

// Reused counts the nodes that will be reused.
func (r *ResumePlan) Reused() int {
	n := 0
	for _, d := range r.Decisions {
		if d.Action == ResumeReuse {
			n++
		}
	}
	return n
}

// NodeRenderer re-plans one node with the given outputs of other nodes known (see RenderNode).
type NodeRenderer func(name string, outputs map[string]map[string]cty.Value) (*NodePlan, error)

// Resume decides every node of p against prev, in dependency order. A node runs when any dependency runs (its
// outputs are not known yet); otherwise it is re-rendered with its reused dependencies' recorded outputs
// (render; nil uses p's node as planned) and decided by DecideNode.
func Resume(p *Plan, prev *PreviousRun, render NodeRenderer) *ResumePlan {
	rp := &ResumePlan{FromRun: prev.ID}
	outputs := map[string]map[string]cty.Value{}
	for _, np := range p.Nodes {
		var running []string
		for _, dep := range np.DependsOn {
			if d := rp.Decision(dep); d == nil || d.Action != ResumeReuse {
				running = append(running, dep)
			}
		}
		if len(running) > 0 {
			rp.Decisions = append(rp.Decisions, ResumeDecision{Node: np.Name, Action: ResumeRun,
				Reason: fmt.Sprintf("upstream %s will run", strings.Join(running, ", "))})
			continue
		}
		rendered := np
		if render != nil && len(np.DependsOn) > 0 {
			r, err := render(np.Name, outputs)
			if err != nil {
				rp.Decisions = append(rp.Decisions, ResumeDecision{Node: np.Name, Action: ResumeRun,
					Reason: "re-planning with the recorded upstream outputs failed: " + err.Error()})
				continue
			}
			rendered = r
		}
		d := DecideNode(rendered, outputs, prev.ID, prev.Nodes[np.Name])
		if d.Action == ResumeReuse {
			outputs[np.Name] = map[string]cty.Value{}
			for _, name := range config.NodeOutputNames {
				outputs[np.Name][name] = cty.StringVal(d.Outputs[name])
			}
		}
		rp.Decisions = append(rp.Decisions, d)
	}
	return rp
}

// RenderNode plans one node of cfg with in's variables and the given outputs of other nodes known: what the
// executor does before running a downstream node, and what Resume's renderer needs.
func RenderNode(cfg *config.Config, in Inputs, name string, outputs map[string]map[string]cty.Value) (*NodePlan, hcl.Diagnostics) {
	in.Outputs, in.Targets = outputs, []string{name}
	p, diags := Build(cfg, in)
	if diags.HasErrors() {
		return nil, diags
	}
	if np := p.Node(name); np != nil {
		return np, diags
	}
	return nil, append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Node not planned",
		Detail: fmt.Sprintf("Re-planning did not produce node %q.", name)})
}
