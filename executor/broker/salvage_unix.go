//go:build unix

package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// salvager is one Salvage: the broker's scratch repositories and what it learnt so far.
type salvager struct {
	req   SalvageRequest
	g     *hostGit
	stage string // staging repository: the checkout's objects, as copied and verified by Push's importer
	host  string // host repository: the verified commits, then the worktree commit
	res   SalvageResult
}

func brokerSalvage(ctx context.Context, req SalvageRequest) (*SalvageResult, error) {
	if err := checkSalvageRequest(&req); err != nil {
		return nil, fmt.Errorf("host broker: salvage: %w", err)
	}
	g, scratch, err := newScratch(req.StateDir, req.Environ, "salvage-")
	if err != nil {
		return nil, fmt.Errorf("host broker: salvage: %w", err)
	}
	defer os.RemoveAll(scratch)
	s := &salvager{req: req, g: g, stage: filepath.Join(scratch, "stage.git"), host: filepath.Join(scratch, "host.git")}
	for _, repo := range []string{s.stage, s.host} {
		if _, err := g.sealed(ctx, nil, "init", "--bare", "--quiet", "--template=", repo); err != nil {
			return nil, fmt.Errorf("host broker: salvage: create %s: %w", filepath.Base(repo), err)
		}
	}
	if err := s.importCommits(ctx); err != nil {
		return nil, fmt.Errorf("host broker: salvage of %s: %w", req.Checkout, err)
	}
	if err := s.commitWorktree(ctx); err != nil {
		return nil, fmt.Errorf("host broker: salvage of the uncommitted changes in %s: %w", req.Checkout, err)
	}
	if s.res.Commits == 0 && s.res.Worktree == "" {
		return &s.res, nil // nothing the agent made: nothing is written
	}
	if err := s.write(ctx); err != nil {
		return nil, fmt.Errorf("host broker: salvage: %w", err)
	}
	return &s.res, nil
}

func checkSalvageRequest(req *SalvageRequest) error {
	if req.Environ == nil {
		req.Environ = os.Environ()
	}
	if req.MaxObjectBytes <= 0 {
		req.MaxObjectBytes = DefaultMaxObjectBytes
	}
	if req.MaxFileBytes <= 0 {
		req.MaxFileBytes = DefaultSalvageMaxFileBytes
	}
	if req.MaxTreeBytes <= 0 {
		req.MaxTreeBytes = DefaultSalvageMaxTreeBytes
	}
	if req.MaxEntries <= 0 {
		req.MaxEntries = DefaultSalvageMaxEntries
	}
	switch {
	case req.Checkout == "" || !filepath.IsAbs(req.Checkout):
		return fmt.Errorf("checkout %q must be an absolute path", req.Checkout)
	case req.Dest == "" || !filepath.IsAbs(req.Dest):
		return fmt.Errorf("salvage directory %q must be an absolute path", req.Dest)
	case req.StateDir == "":
		return errors.New("no state directory")
	case !isObjectID(req.BaseCommit):
		return fmt.Errorf("base commit %q is not a 40-hex commit id", req.BaseCommit)
	}
	return nil
}

// newScratch makes a scratch directory under stateDir with an empty HOME for sealed git.
func newScratch(stateDir string, environ []string, pattern string) (*hostGit, string, error) {
	gitBin, err := lookPathIn("git", environ)
	if err != nil {
		return nil, "", err
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, "", fmt.Errorf("state directory: %w", err)
	}
	scratch, err := os.MkdirTemp(stateDir, pattern)
	if err != nil {
		return nil, "", fmt.Errorf("state directory: %w", err)
	}
	home := filepath.Join(scratch, "home")
	if err := os.Mkdir(home, 0o500); err != nil {
		os.RemoveAll(scratch)
		return nil, "", fmt.Errorf("state directory: %w", err)
	}
	return &hostGit{git: gitBin, environ: environ, dir: scratch, home: home}, scratch, nil
}

// importCommits copies and verifies the checkout's objects as Push does: the cloned commit into the host
// repository unchecked (its ids are the remote's), then the agent's HEAD under strict fsck. Commits that cannot
// be kept (an unreadable HEAD, objects that fail verification, rewritten history) are recorded in CommitsLost and
// the uncommitted changes are then kept on top of the cloned commit; only objects that do not even hold the
// cloned commit make the whole salvage fail.
func (s *salvager) importCommits(ctx context.Context) error {
	base := s.req.BaseCommit
	s.res.Head = base
	head, headErr := checkoutHead(s.req.Checkout)
	pushReq := Request{Checkout: s.req.Checkout, MaxObjectBytes: s.req.MaxObjectBytes}
	if err := copyCheckoutObjects(ctx, s.g, pushReq, s.stage); err != nil {
		return err
	}
	if _, err := s.g.sealed(ctx, nil, "--git-dir="+s.stage, "update-ref", SalvageRefBase, base); err != nil {
		return fmt.Errorf("the checkout's objects do not contain the cloned commit %s: %w", base, err)
	}
	if _, err := s.g.sealed(ctx, nil, "--git-dir="+s.host, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head",
		"--update-shallow", s.stage, "+"+SalvageRefBase+":"+SalvageRefBase); err != nil {
		return fmt.Errorf("fetch the cloned commit from the staging repository: %w", err)
	}
	switch {
	case headErr != nil:
		s.res.CommitsLost = "the checkout's HEAD could not be read: " + headErr.Error()
		return nil
	case head == base:
		return nil
	}
	if _, err := s.g.sealed(ctx, nil, "--git-dir="+s.stage, "update-ref", SalvageRefHead, head); err != nil {
		s.res.CommitsLost = fmt.Sprintf("the checkout's objects do not contain its HEAD commit %s", head)
		return nil
	}
	if _, err := s.g.sealed(ctx, nil, "--git-dir="+s.host, "-c", "transfer.fsckObjects=true", "fetch", "--quiet",
		"--no-tags", "--no-write-fetch-head", "--update-shallow", s.stage, "+"+SalvageRefHead+":"+SalvageRefHead); err != nil {
		s.res.CommitsLost = "the agent's commits failed verification: " + err.Error()
		return nil
	}
	if _, err := s.g.sealed(ctx, nil, "--git-dir="+s.host, "merge-base", "--is-ancestor", base, head); err != nil {
		var ce *commandError
		if errors.As(err, &ce) && ce.ExitCode == 1 {
			s.res.CommitsLost = fmt.Sprintf("the checkout's HEAD %s does not descend from the cloned commit %s (history was rewritten)", head, base)
			return nil
		}
		return err
	}
	out, err := s.g.sealed(ctx, nil, "--git-dir="+s.host, "rev-list", "--count", base+".."+head)
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		return fmt.Errorf("count the agent's commits: %w", err)
	}
	s.res.Head, s.res.Commits = head, n
	return nil
}

// write makes the bundle and the patch in a fresh directory beside Dest, then puts it in Dest's place.
func (s *salvager) write(ctx context.Context) error {
	parent := filepath.Dir(s.req.Dest)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, ".salvage-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	refs := []struct{ ref, id string }{{SalvageRefBase, s.req.BaseCommit}, {SalvageRefHead, s.res.Head}}
	if s.res.Worktree != "" {
		refs = append(refs, struct{ ref, id string }{SalvageRefWorktree, s.res.Worktree})
	}
	args := []string{"--git-dir=" + s.host, "bundle", "create", "--quiet", filepath.Join(tmp, SalvageBundleName)}
	for _, r := range refs {
		if _, err := s.g.sealed(ctx, nil, "--git-dir="+s.host, "update-ref", r.ref, r.id); err != nil {
			return err
		}
		args = append(args, r.ref)
	}
	if _, err := s.g.sealed(ctx, nil, args...); err != nil {
		return fmt.Errorf("write the bundle: %w", err)
	}
	if s.res.Worktree != "" {
		if _, err := s.g.sealed(ctx, nil, "--git-dir="+s.host, "diff-tree", "-p", "--binary", "--full-index",
			"--no-textconv", "--no-ext-diff", "--no-renames", "--no-color", "--output="+filepath.Join(tmp, SalvagePatchName),
			s.res.Head, s.res.Worktree); err != nil {
			return fmt.Errorf("write the patch: %w", err)
		}
	}
	if err := os.RemoveAll(s.req.Dest); err != nil {
		return err
	}
	if err := os.Rename(tmp, s.req.Dest); err != nil {
		return err
	}
	s.res.Kept = true
	s.res.Bundle = filepath.Join(s.req.Dest, SalvageBundleName)
	for _, name := range []string{SalvageBundleName, SalvagePatchName} {
		if st, err := os.Lstat(filepath.Join(s.req.Dest, name)); err == nil {
			s.res.Bytes += st.Size()
			if name == SalvagePatchName {
				s.res.Patch = filepath.Join(s.req.Dest, name)
			}
		}
	}
	return nil
}

func brokerPublishSalvage(ctx context.Context, req PublishRequest) (*PushResult, error) {
	switch {
	case req.Bundle == "" || !filepath.IsAbs(req.Bundle):
		return nil, fmt.Errorf("host broker: salvage bundle %q must be an absolute path", req.Bundle)
	case !isObjectID(req.Commit):
		return nil, fmt.Errorf("host broker: salvage commit %q is not a 40-hex commit id", req.Commit)
	case req.StateDir == "":
		return nil, errors.New("host broker: no state directory")
	}
	if req.Environ == nil {
		req.Environ = os.Environ()
	}
	g, scratch, err := newScratch(req.StateDir, req.Environ, "publish-")
	if err != nil {
		return nil, fmt.Errorf("host broker: %w", err)
	}
	defer os.RemoveAll(scratch)
	// A directory shaped like a checkout, made by the host: the bundle's objects and a detached HEAD. Push then
	// treats it as it treats any agent's checkout.
	co := filepath.Join(scratch, "checkout")
	gitDir := filepath.Join(co, ".git")
	if _, err := g.sealed(ctx, nil, "init", "--bare", "--quiet", "--template=", gitDir); err != nil {
		return nil, fmt.Errorf("host broker: %w", err)
	}
	if _, err := g.sealed(ctx, nil, "--git-dir="+gitDir, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head",
		req.Bundle, "+refs/kew/*:refs/kew/*"); err != nil {
		return nil, fmt.Errorf("host broker: read the salvage bundle %s: %w", req.Bundle, err)
	}
	if err := os.WriteFile(filepath.Join(gitDir, "HEAD"), []byte(req.Commit+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("host broker: %w", err)
	}
	return Push(ctx, Request{Checkout: co, Repo: req.Repo, BaseCommit: req.BaseCommit, Branch: req.Branch,
		StateDir: req.StateDir, Environ: req.Environ, PullRequest: req.PullRequest,
		ProtectedBranches: req.ProtectedBranches, AllowProtectedPush: req.AllowProtectedPush})
}
