package broker

import "context"

// Salvage keeps what a worker made when its attempt ends without its push: the new commits, as a git bundle
// written by the host from objects it imported and verified exactly as Push does, and the uncommitted changes,
// as a commit the host builds from the files of the checkout (read through executor/hostilefs: no link followed,
// FIFOs, sockets and devices skipped, size-bounded) and as a patch of that commit. Nothing is pushed: a kept
// bundle is published only by PublishSalvage, which hands it to Push.

// Salvage file names inside a salvage directory.
const (
	SalvageBundleName = "work.bundle"
	SalvagePatchName  = "uncommitted.patch"
)

// Refs of a salvage bundle: the commit the checkout was cloned at, the agent's HEAD, and the host's commit of
// its uncommitted changes (a child of the HEAD; absent when there were none).
const (
	SalvageRefBase     = "refs/kew/base"
	SalvageRefHead     = "refs/kew/head"
	SalvageRefWorktree = "refs/kew/worktree"
)

// Default bounds of what Salvage copies from an agent's uncommitted files.
const (
	DefaultSalvageMaxFileBytes  = 16 << 20  // one file; a larger one is skipped, never read
	DefaultSalvageMaxTreeBytes  = 256 << 20 // every changed file together
	DefaultSalvageMaxEntries    = 200_000   // directory entries walked, all levels together
	maxSalvageSkippedListed     = 50        // skipped entries named in the result; the rest are counted
	salvageIdentity             = "kewplan <kewplan@localhost>"
	salvageWorktreeCommitPrefix = "kewplan salvage: uncommitted changes"
)

// SalvageRequest asks the host broker to keep a stopped worker's work.
type SalvageRequest struct {
	Checkout   string // the agent's checkout (hostile)
	BaseCommit string // the commit it was cloned at
	// Dest is the salvage directory to write; whatever an earlier attempt left there is replaced.
	Dest string
	// StateDir is the broker's host-owned scratch space; Environ the host environment (nil: os.Environ()).
	StateDir string
	Environ  []string
	// Message is the worktree commit's message body (which node, why it was kept).
	Message string
	// Bounds; 0 means the defaults (DefaultMaxObjectBytes, DefaultSalvageMax*).
	MaxObjectBytes int64
	MaxFileBytes   int64
	MaxTreeBytes   int64
	MaxEntries     int
}

// SalvageResult is what was kept. Kept is false when the agent made no commit and changed no file: then nothing
// was written.
type SalvageResult struct {
	Kept bool
	// Head is the agent's HEAD (BaseCommit when it made no commits); Commits counts base..Head.
	Head    string
	Commits int
	// Worktree is the host's commit of the uncommitted changes on top of Head, "" when there were none;
	// FilesChanged counts the paths it changes.
	Worktree     string
	FilesChanged int
	// Bundle and Patch are the files written ("" when not written); Bytes is their size together.
	Bundle, Patch string
	Bytes         int64
	// Skipped names what was left out of the worktree commit and why ("big.bin: 1073741824 bytes, over the
	// 16777216-byte bound"); SkippedMore counts those not named. The prompt file and the verdict sidecar are
	// left out silently.
	Skipped     []string
	SkippedMore int
	// CommitsLost says why the agent's commits could not be kept ("" when they were, or there were none); the
	// uncommitted changes are then kept on top of BaseCommit.
	CommitsLost string
}

// Salvage keeps a stopped worker's commits and uncommitted changes in req.Dest. It never runs git in the checkout
// or on its .git: the objects are copied and verified as Push copies them, and every file is read through
// executor/hostilefs.
func Salvage(ctx context.Context, req SalvageRequest) (*SalvageResult, error) {
	return brokerSalvage(ctx, req)
}

// PublishRequest asks the broker to publish a kept bundle: Commit (a commit in it, usually the worktree commit or
// the head) is pushed to Branch of Repo through Push, so every check of a normal push applies.
type PublishRequest struct {
	Bundle     string
	Commit     string
	BaseCommit string
	Repo       string
	Branch     string
	StateDir   string
	Environ    []string
	// PullRequest, when not nil, asks for a pull request after the push.
	PullRequest *PullRequest
	// ProtectedBranches and AllowProtectedPush are the node's, as recorded with its kept work: Push judges Branch
	// by them exactly as it judged the node's own push (the remote's default branch is protected too).
	ProtectedBranches  []string
	AllowProtectedPush bool
}

// PublishSalvage publishes a salvage bundle through Push: the bundle is unpacked into a host-owned directory shaped
// like a checkout (its objects and a detached HEAD at req.Commit), and Push copies, verifies (strict fsck, no
// prompt file or verdict sidecar in any commit, the head descends from the base) and pushes it without force.
func PublishSalvage(ctx context.Context, req PublishRequest) (*PushResult, error) {
	return brokerPublishSalvage(ctx, req)
}
