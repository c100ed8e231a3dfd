//go:build unix

package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/kewplan/kewplan/executor/hostilefs"
)

func brokerPush(ctx context.Context, req Request) (*PushResult, error) {
	if err := checkBrokerRequest(&req); err != nil {
		return nil, fmt.Errorf("host broker: %w", err)
	}
	head, err := checkoutHead(req.Checkout)
	if err != nil {
		return nil, fmt.Errorf("host broker: checkout %s: %w", req.Checkout, err)
	}
	if head == req.BaseCommit {
		res := &PushResult{Commit: req.BaseCommit}
		if req.PullRequest != nil {
			res.PullRequestSkipped = "the worker made no new commits, so there is nothing to propose"
		}
		return res, nil
	}

	gitBin, err := lookPathIn("git", req.Environ)
	if err != nil {
		return nil, fmt.Errorf("host broker: %w", err)
	}
	if err := os.MkdirAll(req.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("host broker: state directory: %w", err)
	}
	scratch, err := os.MkdirTemp(req.StateDir, "broker-")
	if err != nil {
		return nil, fmt.Errorf("host broker: state directory: %w", err)
	}
	defer os.RemoveAll(scratch)
	home := filepath.Join(scratch, "home")
	if err := os.Mkdir(home, 0o500); err != nil {
		return nil, fmt.Errorf("host broker: state directory: %w", err)
	}
	g := &hostGit{git: gitBin, environ: req.Environ, dir: scratch, home: home}
	stage := filepath.Join(scratch, "stage.git")
	host := filepath.Join(scratch, "host.git")

	for _, repo := range []string{stage, host} {
		if _, err := g.sealed(ctx, nil, "init", "--bare", "--quiet", "--template=", repo); err != nil {
			return nil, fmt.Errorf("host broker: create %s: %w", filepath.Base(repo), err)
		}
	}
	if !req.AllowProtectedPush {
		if why := protectedBranchWhy(req.ProtectedBranches, req.Branch); why != "" {
			return nil, fmt.Errorf("host broker: %w", &ProtectedBranchError{Branch: req.Branch, Why: why})
		}
		def, err := g.remoteDefaultBranch(ctx, host, req.Repo)
		if err != nil {
			return nil, fmt.Errorf("host broker: %w", err)
		}
		if def != "" && def == req.Branch {
			return nil, fmt.Errorf("host broker: %w", &ProtectedBranchError{Branch: req.Branch,
				Why: "it is the remote's default branch (git ls-remote --symref)"})
		}
	}
	if err := copyCheckoutObjects(ctx, g, req, stage); err != nil {
		return nil, fmt.Errorf("host broker: checkout %s: %w", req.Checkout, err)
	}
	for _, r := range []struct{ ref, id, what string }{
		{"refs/kew/base", req.BaseCommit, "the cloned commit " + req.BaseCommit},
		{"refs/kew/head", head, "its HEAD commit " + head},
	} {
		if _, err := g.sealed(ctx, nil, "--git-dir="+stage, "update-ref", r.ref, r.id); err != nil {
			return nil, fmt.Errorf("host broker: the checkout's objects do not contain %s: %w", r.what, err)
		}
	}
	// The cloned history first, without fsck: its ids are content hashes of what the remote already holds, and
	// index-pack recomputes every one. Then the agent's new objects alone, under strict fsck (malformed trees,
	// ".git" paths, hostile .gitmodules), so that nothing the remote or a later clone would choke on is pushed.
	if _, err := g.sealed(ctx, nil, "--git-dir="+host, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head",
		"--update-shallow", stage, "+refs/kew/base:refs/kew/base"); err != nil {
		return nil, fmt.Errorf("host broker: fetch the cloned commit from the staging repository: %w", err)
	}
	if _, err := g.sealed(ctx, nil, "--git-dir="+host, "-c", "transfer.fsckObjects=true", "fetch", "--quiet",
		"--no-tags", "--no-write-fetch-head", "--update-shallow", stage, "+refs/kew/head:refs/kew/head"); err != nil {
		return nil, fmt.Errorf("host broker: the agent's commits failed verification: %w", err)
	}
	if _, err := g.sealed(ctx, nil, "--git-dir="+host, "merge-base", "--is-ancestor", req.BaseCommit, head); err != nil {
		var ce *commandError
		if errors.As(err, &ce) && ce.ExitCode == 1 {
			return nil, fmt.Errorf("host broker: the checkout's HEAD %s does not descend from the cloned commit %s "+
				"(history was rewritten); nothing was pushed", head, req.BaseCommit)
		}
		return nil, fmt.Errorf("host broker: %w", err)
	}

	if err := refusePlantedFiles(ctx, g, host, req.BaseCommit, head); err != nil {
		return nil, fmt.Errorf("host broker: %w", err)
	}

	if req.BeforePush != nil {
		if err := req.BeforePush(head); err != nil {
			return nil, fmt.Errorf("host broker: nothing was pushed: %w", err)
		}
	}
	args := []string{"--quiet", "--no-follow-tags"}
	if req.Force {
		args = append(args, "--force")
	}
	args = append(args, "--", req.Repo, head+":refs/heads/"+req.Branch)
	if _, err := g.push(ctx, host, args...); err != nil {
		var ce *commandError
		if errors.As(err, &ce) && (strings.Contains(ce.Stderr, "non-fast-forward") || strings.Contains(ce.Stderr, "fetch first")) {
			return nil, fmt.Errorf("host broker: the remote branch %s already has commits that %s does not contain; "+
				"delete the branch, choose another branch, or allow a forced push: %w", req.Branch, head, err)
		}
		return nil, fmt.Errorf("host broker: push %s to %s: %w", req.Branch, redactURLCredentials(req.Repo), err)
	}
	res := &PushResult{Commit: head, Branch: req.Branch, Pushed: true}
	if req.PullRequest != nil {
		res.PullRequest, res.PullRequestSkipped = openPullRequest(ctx, g, req, head)
	}
	return res, nil
}

func brokerRemoteBranch(ctx context.Context, req BranchRequest) (string, error) {
	if req.Environ == nil {
		req.Environ = os.Environ()
	}
	switch {
	case req.Repo == "" || strings.HasPrefix(req.Repo, "-"):
		return "", fmt.Errorf("host broker: repository %q is not a remote git can ask", redactURLCredentials(req.Repo))
	case req.StateDir == "":
		return "", errors.New("host broker: no state directory")
	}
	ref := "refs/heads/" + req.Branch
	if err := checkRefName(ref); err != nil {
		return "", fmt.Errorf("host broker: branch %q: %w", req.Branch, err)
	}
	g, scratch, err := newScratch(req.StateDir, req.Environ, "broker-")
	if err != nil {
		return "", fmt.Errorf("host broker: %w", err)
	}
	defer os.RemoveAll(scratch)
	host := filepath.Join(scratch, "host.git")
	if _, err := g.sealed(ctx, nil, "init", "--bare", "--quiet", "--template=", host); err != nil {
		return "", fmt.Errorf("host broker: create %s: %w", filepath.Base(host), err)
	}
	out, err := g.remote(ctx, host, "ls-remote", "--", req.Repo, ref)
	if err != nil {
		return "", fmt.Errorf("host broker: ask %s for its branch %s: %w", redactURLCredentials(req.Repo), req.Branch, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		id, name, ok := strings.Cut(line, "\t")
		if ok && name == ref && isObjectID(id) {
			return id, nil
		}
	}
	return "", nil
}

func checkBrokerRequest(req *Request) error {
	if req.Environ == nil {
		req.Environ = os.Environ()
	}
	if req.MaxObjectBytes <= 0 {
		req.MaxObjectBytes = DefaultMaxObjectBytes
	}
	switch {
	case req.Checkout == "" || !filepath.IsAbs(req.Checkout):
		return fmt.Errorf("checkout %q must be an absolute path", req.Checkout)
	case req.StateDir == "":
		return errors.New("no state directory")
	case req.Repo == "" || strings.HasPrefix(req.Repo, "-"):
		return fmt.Errorf("repository %q is not a remote git can push to", redactURLCredentials(req.Repo))
	case !isObjectID(req.BaseCommit):
		return fmt.Errorf("base commit %q is not a 40-hex commit id", req.BaseCommit)
	case req.Branch == "":
		return errors.New("no branch to push to")
	}
	if isLocalRepoPath(req.Repo) && !filepath.IsAbs(req.Repo) {
		return fmt.Errorf("repository path %q must be absolute", req.Repo)
	}
	if err := checkRefName("refs/heads/" + req.Branch); err != nil {
		return fmt.Errorf("branch %q: %w", req.Branch, err)
	}
	return nil
}

// isLocalRepoPath reports whether repo names a path rather than a URL or an scp-like host:path.
func isLocalRepoPath(repo string) bool {
	if strings.Contains(repo, "://") {
		return false
	}
	before, _, _ := strings.Cut(repo, "/")
	return !strings.Contains(before, ":")
}

func checkoutHead(checkout string) (string, error) {
	root, err := hostilefs.OpenRoot(checkout)
	if err != nil {
		return "", err
	}
	defer root.Close()
	gitDir, err := openGitDir(root)
	if err != nil {
		return "", err
	}
	defer gitDir.Close()
	return readCheckoutHead(gitDir)
}

func copyCheckoutObjects(ctx context.Context, g *hostGit, req Request, stage string) error {
	root, err := hostilefs.OpenRoot(req.Checkout)
	if err != nil {
		return err
	}
	defer root.Close()
	gitDir, err := openGitDir(root)
	if err != nil {
		return err
	}
	defer gitDir.Close()
	im := &objectImporter{git: g, stage: stage, limit: req.MaxObjectBytes, budget: req.MaxObjectBytes,
		inflated: req.MaxObjectBytes, entries: maxObjectEntries}
	return im.importObjects(ctx, gitDir)
}
