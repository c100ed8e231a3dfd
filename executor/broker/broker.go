package broker

import (
	"context"
	"fmt"

	"github.com/kewplan/kewplan/planner"
)

// Request asks the host broker to publish a worker's commits after a clean exit.
type Request struct {
	Checkout   string // the agent's checkout (hostile: the agent controlled every byte of it)
	Repo       string // remote the checkout was cloned from
	BaseCommit string // commit the checkout was cloned at
	Branch     string // remote branch to push to (default kew/<node>)
	StateDir   string // host-owned scratch space for the broker
	// PullRequest, when not nil, asks for a pull request after the push.
	PullRequest *PullRequest

	// Environ is the host environment for git push and gh (PATH, HOME, SSH_AUTH_SOCK, credential helpers' needs);
	// nil means os.Environ(). The broker's own repositories never see any of its git configuration; the push sees
	// its transport settings only.
	Environ []string
	// Force pushes even when the remote branch has commits the new head does not contain. Off by default: a
	// non-fast-forward push is refused with a message naming the branch.
	Force bool
	// MaxObjectBytes bounds the object data copied out of the checkout, and what it inflates to; 0 means
	// DefaultMaxObjectBytes.
	MaxObjectBytes int64
	// ProtectedBranches are the branch patterns Branch may not match (planner.ProtectedBranches; nil means the
	// built-in ones). The remote's default branch, which only the remote knows, is protected too: the broker asks
	// it with git ls-remote --symref before pushing. AllowProtectedPush (the node's allow_protected_push) lifts
	// both.
	ProtectedBranches  []string
	AllowProtectedPush bool
	// BeforePush, when set, is called with the exact commit about to be pushed, after every check and just before
	// the push; an error stops the push (the caller could not write ahead what it is about to do).
	BeforePush func(commit string) error
}

// ProtectedBranchError refuses a push to a protected branch (rule planner.RulePushProtectedBranch).
type ProtectedBranchError struct {
	Branch string
	// Why says what protects it: "the remote's default branch" or the pattern it matches.
	Why string
	// Advice replaces the sentence saying what to do instead ("" gives the one for a worker's push).
	Advice string
}

func (e *ProtectedBranchError) Error() string {
	advice := e.Advice
	if advice == "" {
		advice = "a worker pushes to a branch of its own and reaches it through a pull request (set allow_protected_push = true on the node to push there knowingly)"
	}
	return fmt.Sprintf("%s: the branch %q is protected (%s), so nothing was pushed; %s",
		planner.RulePushProtectedBranch, e.Branch, e.Why, advice)
}

// protectedBranchWhy returns why branch is protected by patterns (nil: the built-in ones), or "".
func protectedBranchWhy(patterns []string, branch string) string {
	if patterns == nil {
		patterns = planner.ProtectedBranches(nil, "")
	}
	if pat, ok := planner.ProtectedBranchPattern(patterns, branch); ok {
		if pat == branch {
			return "a protected branch"
		}
		return "it matches " + pat
	}
	return ""
}

// PullRequest is a node's pull_request block, evaluated.
type PullRequest struct {
	Base  string
	Title string
	// Body is the pull request's description; "" gives a short default naming the commit.
	Body string
	// Draft opens it as a draft pull request.
	Draft bool
}

// PushResult is what the broker did.
type PushResult struct {
	Commit string // HEAD after the run: the pushed commit, or BaseCommit when there were no new commits
	Branch string // the branch pushed to ("" when nothing was pushed)
	Pushed bool
	// PullRequest is the URL of the opened pull request; PullRequestSkipped says why none was opened.
	PullRequest        string
	PullRequestSkipped string
}

// Push publishes the worker's new commits from a host-owned repository, never running anything the agent
// could have configured in the checkout.
//
// It never runs git in the checkout or on its .git. HEAD is resolved by reading .git/HEAD and the ref it names as
// plain files (no link followed at any component; a .git that is a file or a link is refused). The object data
// is copied into a host-owned staging repository (loose objects verified by hash, packs re-indexed by git
// index-pack; alternates refused), and a second host-owned repository fetches the cloned commit and then, with
// strict fsck of every new object, the agent's head, from that staging repository only. No git command of the
// broker reads the host's system or global git configuration or attributes, so no filter, hook or fsmonitor of
// the host user's runs on the agent's content. The push to req.Repo runs from the second repository with only the
// host's transport settings (credential helpers, url.*.insteadOf, http.*, ssh) carried over, and its HOME for
// ssh and credential stores. A head that does not descend from BaseCommit is refused. No new commits gives Pushed=false and Commit=BaseCommit.
//
// A pull request is opened with gh when asked for, gh is on PATH and `gh auth status` succeeds; otherwise, or if
// gh fails after the push, PullRequestSkipped says why and the push still counts.
func Push(ctx context.Context, req Request) (*PushResult, error) {
	return brokerPush(ctx, req)
}

// BranchRequest asks the remote which commit one of its branches holds.
type BranchRequest struct {
	Repo     string // the remote
	Branch   string // the branch, without refs/heads/
	StateDir string // host-owned scratch space for the broker
	// Environ is the host environment, as for Request: only its transport settings reach git.
	Environ []string
}

// RemoteBranch asks the remote, with git ls-remote from a host-owned scratch repository and the push's transport
// settings, which commit refs/heads/Branch holds: "" when the remote has no such branch. ctx bounds the question.
func RemoteBranch(ctx context.Context, req BranchRequest) (string, error) {
	return brokerRemoteBranch(ctx, req)
}
