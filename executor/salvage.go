package executor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kewplan/kewplan/executor/broker"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/statedir"
	"github.com/kewplan/kewplan/planner"
)

// Publishing kept work (`kewplan salvage RUN NODE`). What a worker made before it was stopped is kept by its
// engine in the state directory (statedir.Salvage) and recorded with its node; nothing of it leaves the host
// until this is asked for, and then it goes through the same broker as a normal push, with every check.

// SalvageOptions are the options of PublishSalvage.
type SalvageOptions struct {
	StateDir string
	RunID    string
	Node     string
	// Branch is the branch to push to; "" means SalvageBranch's default.
	Branch string
	// PullRequest opens a draft pull request after the push.
	PullRequest bool
	// Environ is the host environment for git and gh; nil means os.Environ().
	Environ []string
}

// SalvageOutcome is what PublishSalvage did.
type SalvageOutcome struct {
	RunID   string
	Node    string
	Salvage ledger.Salvage
	Branch  string
	Commit  string
	// PullRequest is the opened pull request's URL; PullRequestSkipped says why none was opened (gh missing,
	// not authenticated, not a hosted repository).
	PullRequest        string
	PullRequestSkipped string
}

// SalvageBranch is the default branch kept work is published to: kew/salvage/<node's path name>-<run>.
func SalvageBranch(s *ledger.Salvage, runID string) string {
	return "kew/salvage/" + filepath.Base(s.Dir) + "-" + runID
}

// PublishSalvage pushes a node's kept work (its commits and the host's commit of its uncommitted changes) to a
// new branch of the repository it cloned, through broker.PublishSalvage: strict fsck, no prompt file or verdict
// sidecar in any commit, no force. It holds the state directory's lock, so no apply or prune runs meanwhile.
func PublishSalvage(ctx context.Context, opts SalvageOptions) (*SalvageOutcome, error) {
	dir, l, lock, err := openStateForMaintenance(opts.StateDir)
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	defer l.Close()
	s, err := findSalvage(l, opts.RunID, opts.Node)
	if err != nil {
		return nil, err
	}
	out := &SalvageOutcome{RunID: opts.RunID, Node: opts.Node, Salvage: *s, Branch: opts.Branch, Commit: s.Worktree}
	if out.Branch == "" {
		out.Branch = SalvageBranch(s, opts.RunID)
	}
	if out.Commit == "" {
		out.Commit = s.Head
	}
	if !s.ProtectionsRecorded && out.Branch != SalvageBranch(s, opts.RunID) {
		// Which branches the node's push could not reach is unknown: only the branch of its own is safe.
		return nil, fmt.Errorf("%s: the work kept of node %s in run %s was recorded without the protected branches of its push "+
			"(by an older kewplan), so it can be published only to its own branch %s: omit --branch",
			planner.RulePushProtectedBranch, opts.Node, opts.RunID, SalvageBranch(s, opts.RunID))
	}
	req := broker.PublishRequest{Bundle: filepath.Join(s.Dir, broker.SalvageBundleName), Commit: out.Commit,
		BaseCommit: s.BaseCommit, Repo: s.Repo, Branch: out.Branch, StateDir: dir.Broker(), Environ: opts.Environ,
		ProtectedBranches: s.ProtectedBranches, AllowProtectedPush: s.AllowProtectedPush}
	if len(req.ProtectedBranches) == 0 {
		req.ProtectedBranches = nil // the built-in ones, never none
	}
	if opts.PullRequest {
		req.PullRequest = &broker.PullRequest{Draft: true,
			Title: fmt.Sprintf("kewplan salvage: %s (run %s)", opts.Node, opts.RunID),
			Body: fmt.Sprintf("Work kept by kewplan from node %s of run %s because %s (%s), published with `kewplan salvage`.",
				opts.Node, opts.RunID, s.Why, s.Summary())}
	}
	push, err := broker.PublishSalvage(ctx, req)
	var protected *broker.ProtectedBranchError
	if errors.As(err, &protected) {
		protected.Advice = fmt.Sprintf("kept work is published under the protections its node's own push had "+
			"(the sandbox's protected_branches, the branch it was cloned from, the remote's default branch; "+
			"allow_protected_push was off), so publish it to a branch of its own (omit --branch for %s) and "+
			"reach %s through a pull request (--pull-request)", SalvageBranch(s, opts.RunID), out.Branch)
		err = protected // its message was written when it was wrapped: wrap it anew with the advice
	}
	if err != nil {
		return nil, fmt.Errorf("publish the work kept of node %s: %w", opts.Node, err)
	}
	out.PullRequest, out.PullRequestSkipped = push.PullRequest, push.PullRequestSkipped
	if err := l.RecordSalvagePublished(opts.RunID, opts.Node, out.Branch, out.PullRequest); err != nil {
		return out, err
	}
	out.Salvage.PublishedBranch, out.Salvage.PublishedPullRequest = out.Branch, out.PullRequest
	return out, nil
}

func findSalvage(l *ledger.Ledger, runID, node string) (*ledger.Salvage, error) {
	_, nodes, err := l.Run(runID)
	if err != nil {
		if errors.Is(err, ledger.ErrNoRun) {
			return nil, fmt.Errorf("%w; list the recorded runs with kewplan runs", err)
		}
		return nil, err
	}
	for _, n := range nodes {
		if n.Node != node {
			continue
		}
		switch s := n.Salvage; {
		case s == nil:
			return nil, fmt.Errorf("run %s kept nothing of node %s (%s): only a worker that ended without its push and had made commits or changed files has work kept", runID, node, n.Status)
		case s.Pruned:
			return nil, fmt.Errorf("the work kept of node %s in run %s was removed by kewplan runs prune", node, runID)
		}
		return n.Salvage, nil
	}
	return nil, fmt.Errorf("run %s has no node %q; see kewplan runs show %s", runID, node, runID)
}

// openStateForMaintenance takes the lock of an existing state directory and opens its ledger (never creating one).
func openStateForMaintenance(root string) (statedir.Dir, *ledger.Ledger, *ledger.StateLock, error) {
	dir, err := statedir.New(root)
	if err != nil {
		return dir, nil, nil, err
	}
	if _, err := os.Stat(dir.Ledger()); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return dir, nil, nil, fmt.Errorf("no run ledger at %s: nothing was applied with this state directory yet (use --state-dir to point at another)", dir.Ledger())
		}
		return dir, nil, nil, err
	}
	lock, err := ledger.LockStateDir(dir)
	if err != nil {
		return dir, nil, nil, err
	}
	l, err := ledger.Open(dir.Ledger())
	if err != nil {
		lock.Unlock()
		return dir, nil, nil, err
	}
	return dir, l, lock, nil
}
