package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/executor/broker"
	"github.com/kewplan/kewplan/executor/checkout"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/statedir"
	"github.com/kewplan/kewplan/executor/verdict"
	"github.com/kewplan/kewplan/planner"
)

// reuseNodes records every node the resume decision reuses, before anything runs: status reused, the run its
// outputs came from, the recorded outputs (which feed its dependants exactly as recorded) and its fingerprint.
// No checkout, no container. It returns the reused nodes' results by name.
func (a *applier) reuseNodes() map[string]*ledger.NodeResult {
	out := map[string]*ledger.NodeResult{}
	rp := a.opts.Resume
	if rp == nil {
		return out
	}
	for _, np := range a.opts.Plan.Nodes {
		d := rp.Decision(np.Name)
		if d == nil || d.Action != planner.ResumeReuse {
			continue
		}
		r := a.baseResult(np)
		r.Status, r.ReusedFrom, r.Ended = ledger.StatusReused, d.FromRun, time.Now()
		r.Commit, r.Branch = d.Outputs["commit"], d.Outputs["branch"]
		r.Totals.SessionID = d.Outputs["session_id"]
		if v := d.Outputs["verdict"]; v != "" {
			r.Verdict = &verdict.Verdict{Verdict: v}
		}
		if d.Fingerprint != nil {
			if b, err := json.Marshal(d.Fingerprint); err == nil {
				r.Fingerprint = string(b)
			}
		}
		if err := a.ledger.RecordNode(r); err != nil {
			a.warn(np.Name, err.Error())
		}
		outputs := map[string]cty.Value{}
		for _, name := range config.NodeOutputNames {
			outputs[name] = cty.StringVal(d.Outputs[name])
		}
		a.mu.Lock()
		a.outputs[np.Name] = outputs
		a.mu.Unlock()
		out[np.Name] = r
		a.hook.NodeDone(*r)
	}
	return out
}

// salvageStart is the kept work np starts from under apply --resume, or nil.
func (a *applier) salvageStart(np *planner.NodePlan) *planner.SalvageStart {
	if a.opts.Resume == nil || !np.ResumeFromSalvage || !np.Pushes() {
		return nil
	}
	if d := a.opts.Resume.Decision(np.Name); d != nil && d.Action == planner.ResumeRun {
		return d.FromSalvage
	}
	return nil
}

// ResumeLatest names the newest run of a ledger that is not running (apply --resume latest): finished, or
// interrupted (its apply died).
const ResumeLatest = "latest"

// LoadPreviousRun reads what run runID (or ResumeLatest) of the state directory's ledger recorded about each node, as
// planner.Resume needs it: status, input fingerprint, outputs (as they fed the dependants), the run they were
// themselves reused from, and, for a node that pushed its branch, where that branch points on the remote now
// (git ls-remote of the node's repository in plan, relative paths resolved against configDir).
func LoadPreviousRun(ctx context.Context, dir statedir.Dir, runID string, plan *planner.Plan, configDir string) (*planner.PreviousRun, error) {
	path := dir.Ledger()
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("--resume: no run ledger at %s: nothing was applied with this state directory yet (use --state-dir to point at another)", path)
	}
	l, err := ledger.Open(path)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	if runID == ResumeLatest {
		runs, err := l.Runs()
		if err != nil {
			return nil, err
		}
		runID = ""
		for _, r := range runs {
			if r.Status != ledger.RunRunning {
				runID = r.ID
				break
			}
		}
		if runID == "" {
			return nil, fmt.Errorf("--resume latest: the ledger %s has no finished run to resume", path)
		}
	}
	_, nodes, err := l.Run(runID)
	if err != nil {
		if errors.Is(err, ledger.ErrNoRun) {
			return nil, fmt.Errorf("--resume: %w; list the runs with `kewplan runs`", err)
		}
		return nil, err
	}
	prev := &planner.PreviousRun{ID: runID, Nodes: map[string]*planner.PreviousNode{}}
	for _, n := range nodes {
		pn := &planner.PreviousNode{Status: n.Status, Pushed: n.Pushed, ReusedFrom: n.ReusedFrom, Outputs: recordOutputs(n)}
		if n.Fingerprint != "" {
			var fp planner.InputFingerprint
			if json.Unmarshal([]byte(n.Fingerprint), &fp) == nil {
				pn.Fingerprint = &fp
			}
		}
		if s := n.Salvage; s != nil && !s.Pruned && s.BaseCommit != "" {
			commit := s.Worktree
			if commit == "" {
				commit = s.Head
			}
			bundle := filepath.Join(s.Dir, broker.SalvageBundleName)
			if _, err := os.Stat(bundle); err == nil {
				pn.Salvage = &planner.SalvageStart{Run: runID, Bundle: bundle, BaseCommit: s.BaseCommit, Commit: commit, Summary: s.Summary()}
			}
		}
		if np := plan.Node(n.Node); np != nil && n.Pushed && n.Branch != "" && np.Repo != "" {
			if head, err := checkout.RemoteBranchHead(ctx, checkout.ResolveRepo(np.Repo, configDir), n.Branch); err == nil {
				pn.BranchChecked, pn.BranchHead = true, head
			}
		}
		prev.Nodes[n.Node] = pn
	}
	return prev, nil
}

// recordOutputs are a recorded node's outputs exactly as nodeOutputs gave them to its dependants.
func recordOutputs(n ledger.NodeRecord) map[string]string {
	commit := n.Commit
	if commit == "" {
		commit = n.BaseCommit
	}
	return map[string]string{"commit": commit, "branch": n.Branch, "status": n.Status, "verdict": n.Verdict, "session_id": n.SessionID}
}
