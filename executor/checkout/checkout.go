// Package checkout is a node's checkout on the host: the host's git (clone, ls-remote) run without the host's own
// configuration, the checkout handed to the agent's uid, and the prompt file that is deleted on every path out.
// It runs no container and reads nothing an agent wrote but the prompt file's own directory entry.
package checkout

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kewplan/kewplan/executor/broker"
	"github.com/kewplan/kewplan/planner"
)

// Host-side git runs here only on checkouts kewplan just cloned, before any container has touched them, and never
// with the repository's hooks: the agent's work is read back by the host broker (executor/broker: broker_unix.go
// and gitsafe_*_unix.go), never by these helpers. What is cloned may still be an agent's work (a reviewer's ref is
// a worker's commit), so none of the host user's git setup applies to it either: no system or global
// configuration, no host attributes, so no filter, hook or fsmonitor of theirs runs on content an agent chose.
// Only the host's transport settings (credential helpers, URL rewriting, HTTP and SSH) reach a command that talks
// to a remote, as they reach the broker's push.

// sealedGitConfig is passed as -c to every host git command here.
var sealedGitConfig = []string{"core.hooksPath=/dev/null", "core.fsmonitor=false", "core.attributesFile=/dev/null",
	"protocol.ext.allow=never", "gc.auto=0", "maintenance.auto=false"}

// transportEnvVars are the host's GIT_ variables kept: how git reaches and authenticates to a remote.
var transportEnvVars = regexp.MustCompile(`^GIT_(SSH|SSH_COMMAND|SSH_VARIANT|ASKPASS|PROXY_COMMAND|SSL_[A-Z_]+|HTTP_[A-Z_]+|PROXY_SSL_[A-Z_]+)$`)

// sealedGitEnv is the host environment without git's own variables (but the transport ones), with system and
// global configuration and system attributes off, and transport as GIT_CONFIG_COUNT entries.
func sealedGitEnv(transport [][2]string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "GIT_") && !transportEnvVars.MatchString(name) {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_ATTR_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0",
		fmt.Sprintf("GIT_CONFIG_COUNT=%d", len(transport)))
	for i, kv := range transport {
		env = append(env, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", i, kv[0]), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", i, kv[1]))
	}
	return env
}

// hostTransport reads the host's system, global and command-line configuration, outside any repository, and
// keeps its transport keys in order. It reads configuration files only, never an object.
func hostTransport(ctx context.Context) ([][2]string, error) {
	cmd := exec.CommandContext(ctx, "git", "config", "--list", "--null", "--show-scope")
	cmd.Dir = "/"
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); name != "GIT_DIR" && name != "GIT_WORK_TREE" && name != "GIT_COMMON_DIR" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 1 && len(out) == 0 {
			return nil, nil // no configuration at all
		}
		return nil, fmt.Errorf("read the host's git transport configuration: %w", err)
	}
	return broker.TransportConfig(out), nil
}

// gitCommand runs the system git sealed from the host's configuration (transport aside), with hooks disabled, no
// terminal prompts and no user-supplied transports.
func gitCommand(ctx context.Context, dir string, transport [][2]string, args ...string) *exec.Cmd {
	full := make([]string, 0, 2*len(sealedGitConfig)+len(args))
	for _, c := range sealedGitConfig {
		full = append(full, "-c", c)
	}
	cmd := exec.CommandContext(ctx, "git", append(full, args...)...)
	cmd.Dir = dir
	cmd.Env = sealedGitEnv(transport)
	return cmd
}

// RunGit runs a sealed host git command in dir and returns its trimmed output. A command that talks to a remote
// (clone, fetch from a URL, ls-remote) is given the host's transport settings.
func RunGit(ctx context.Context, dir string, args ...string) (string, error) {
	var transport [][2]string
	if len(args) > 0 && (args[0] == "clone" || args[0] == "ls-remote") {
		var err error
		if transport, err = hostTransport(ctx); err != nil {
			return "", err
		}
	}
	var stdout, stderr bytes.Buffer
	cmd := gitCommand(ctx, dir, transport, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 2000 {
			msg = msg[:2000] + "…"
		}
		if msg == "" {
			msg = err.Error()
		}
		return "", fmt.Errorf("git %s: %s", args[0], msg)
	}
	return strings.TrimSpace(stdout.String()), nil
}

// isLocalRepo reports whether repo names a path on this host rather than a URL or an scp-style address.
func isLocalRepo(repo string) bool {
	if strings.Contains(repo, "://") {
		return strings.HasPrefix(repo, "file://")
	}
	if i := strings.IndexByte(repo, ':'); i > 0 && !strings.ContainsRune(repo[:i], '/') {
		return false // user@host:path
	}
	return true
}

// ResolveRepo makes a relative local repository path relative to the configuration directory, so a configuration
// works the same from any working directory. URLs and absolute paths are returned unchanged.
func ResolveRepo(repo, configDir string) string {
	if !isLocalRepo(repo) || strings.HasPrefix(repo, "file://") || filepath.IsAbs(repo) || configDir == "" {
		return repo
	}
	abs, err := filepath.Abs(filepath.Join(configDir, repo))
	if err != nil {
		return repo
	}
	return abs
}

// Clone clones repo into dir (which must not exist) and checks out ref: a branch of the remote (checked
// out as a local branch of the same name), a tag, or a commit id; "" means the remote's default branch. It returns
// the commit checked out. Local repositories are copied, never hard-linked: a hard-linked object file would let
// the agent (which owns the checkout) rewrite the source repository's objects.
func Clone(ctx context.Context, repo, ref, dir string) (string, error) {
	if strings.HasPrefix(repo, "-") {
		return "", fmt.Errorf("repo %q starts with '-': refusing to pass it to git", repo)
	}
	if strings.HasPrefix(ref, "-") {
		return "", fmt.Errorf("ref %q starts with '-': refusing to pass it to git", ref)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return "", fmt.Errorf("clone %s: %w", repo, err)
	}
	if _, err := os.Lstat(dir); err == nil {
		return "", fmt.Errorf("clone %s: checkout directory %s already exists", repo, dir)
	}
	if _, err := RunGit(ctx, filepath.Dir(dir), "clone", "--quiet", "--no-hardlinks", "--", repo, dir); err != nil {
		return "", fmt.Errorf("clone %s: %w", repo, err)
	}
	if ref != "" {
		if sha, err := RunGit(ctx, dir, "rev-parse", "--verify", "--quiet", "refs/remotes/origin/"+ref+"^{commit}"); err == nil && sha != "" {
			if _, err := RunGit(ctx, dir, "checkout", "--quiet", "-B", ref, sha); err != nil {
				return "", fmt.Errorf("check out %s of %s: %w", ref, repo, err)
			}
		} else if sha, err := RunGit(ctx, dir, "rev-parse", "--verify", "--quiet", "--end-of-options", ref+"^{commit}"); err == nil && sha != "" {
			if _, err := RunGit(ctx, dir, "checkout", "--quiet", "--detach", sha); err != nil {
				return "", fmt.Errorf("check out %s of %s: %w", ref, repo, err)
			}
		} else {
			return "", fmt.Errorf("ref %q is neither a branch, a tag nor a commit of %s; check the node's ref (or the upstream node that produced it)", ref, repo)
		}
	}
	head, err := RunGit(ctx, dir, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return "", fmt.Errorf("clone %s: %s has no commit to check out: %w", repo, ref, err)
	}
	return head, nil
}

// StartFromBundle checks out commit of a host-made git bundle (kept work of an earlier run, which descends from
// the commit the checkout was cloned at) in a checkout the agent has not touched yet, and returns it.
func StartFromBundle(ctx context.Context, dir, bundle, commit string) (string, error) {
	if strings.HasPrefix(bundle, "-") || !isHex40(commit) {
		return "", fmt.Errorf("kept work %s at %q: not a bundle and a commit id", bundle, commit)
	}
	if _, err := RunGit(ctx, dir, "fetch", "--quiet", "--no-tags", "--", bundle, "+refs/kew/*:refs/kew-salvage/*"); err != nil {
		return "", fmt.Errorf("start from the kept work %s: %w", bundle, err)
	}
	if _, err := RunGit(ctx, dir, "checkout", "--quiet", "--detach", commit); err != nil {
		return "", fmt.Errorf("start from the kept work %s: %w", bundle, err)
	}
	refs, _ := RunGit(ctx, dir, "for-each-ref", "--format=%(refname)", "refs/kew-salvage/")
	for _, ref := range strings.Fields(refs) {
		if _, err := RunGit(ctx, dir, "update-ref", "-d", ref); err != nil {
			return "", fmt.Errorf("start from the kept work %s: %w", bundle, err)
		}
	}
	head, err := RunGit(ctx, dir, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return "", err
	}
	if head != commit {
		return "", fmt.Errorf("start from the kept work %s: HEAD is %s, want %s", bundle, head, commit)
	}
	return head, nil
}

func isHex40(s string) bool {
	if len(s) != 40 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// MakeWritableByAgent gives the container's uid the checkout. As root, chown -R to 1001:1001 without following
// links; as another user, open it up with permission bits (the container runs as 1001, not as us).
func MakeWritableByAgent(dir string) error {
	switch euid := os.Geteuid(); {
	case euid == 0:
		return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, planner.AgentUID, planner.AgentUID)
		})
	case euid == planner.AgentUID:
		return nil
	default:
		return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.Type()&fs.ModeSymlink != 0 {
				return nil
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			mode := info.Mode().Perm() | 0o666
			if d.IsDir() || info.Mode().Perm()&0o100 != 0 {
				mode |= 0o111
			}
			return os.Chmod(p, mode)
		})
	}
}

// PromptFile is the prompt written into one checkout. The checkout's root is opened once, before the container
// starts, and every later operation goes through that handle: nothing the agent plants (a link, a renamed
// directory) can redirect it outside the checkout.
type PromptFile struct {
	mu      sync.Mutex // Remove may race with a last-resort cleanup after a second signal
	root    *os.Root
	removed bool
	closed  bool
}

// ErrPromptExists is wrapped when something (file, link, directory, FIFO) already sits at the prompt's name.
var ErrPromptExists = errors.New("prompt file name already taken")

// WritePrompt creates <checkout>/.kew-prompt.txt exclusively (refusing anything already there, a symlink
// included, so a planted link can never make kewplan truncate or write another file), makes it readable by the
// agent's uid only where possible, and lists it in .git/info/exclude so it can never be committed.
func WritePrompt(checkout string, text []byte) (*PromptFile, error) {
	root, err := os.OpenRoot(checkout)
	if err != nil {
		return nil, fmt.Errorf("open checkout %s: %w", checkout, err)
	}
	if fi, err := root.Lstat(planner.PromptFilename); err == nil {
		root.Close()
		return nil, fmt.Errorf("%w: %s already exists in the checkout (%s); the repository must not contain it — remove it from the repository",
			ErrPromptExists, planner.PromptFilename, fi.Mode().Type())
	}
	mode := os.FileMode(0o600)
	euid := os.Geteuid()
	if euid != 0 && euid != planner.AgentUID {
		mode = 0o644 // the container's uid is not ours and we cannot chown: it must be able to read it
	}
	f, err := root.OpenFile(planner.PromptFilename, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, mode)
	if err != nil {
		root.Close()
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("%w: %s: %v", ErrPromptExists, planner.PromptFilename, err)
		}
		return nil, fmt.Errorf("write prompt file: %w", err)
	}
	p := &PromptFile{root: root}
	_, werr := f.Write(text)
	if werr == nil && euid == 0 {
		werr = f.Chown(planner.AgentUID, planner.AgentUID)
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = excludeFromGit(root, "/"+planner.PromptFilename, "/"+planner.VerdictFilename)
	}
	if werr != nil {
		rmErr := p.Remove()
		p.Close()
		return nil, errors.Join(fmt.Errorf("write prompt file: %w", werr), rmErr)
	}
	return p, nil
}

func excludeFromGit(root *os.Root, patterns ...string) error {
	if fi, err := root.Lstat(".git"); err != nil || !fi.IsDir() {
		return fmt.Errorf("the checkout's .git is not a directory")
	}
	if err := root.MkdirAll(".git/info", 0o755); err != nil {
		return fmt.Errorf("exclude the prompt from git: %w", err)
	}
	f, err := root.OpenFile(".git/info/exclude", os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return fmt.Errorf("exclude the prompt from git: %w", err)
	}
	_, err = f.WriteString("\n# kewplan: host-written files, never committed\n" + strings.Join(patterns, "\n") + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("exclude the prompt from git: %w", err)
	}
	return nil
}

// Remove unlinks the prompt's name (never following a link the agent may have put there). It is idempotent. When
// the agent turned the name into a non-empty directory, that directory is removed too, inside the checkout only,
// and the error still reports it.
func (p *PromptFile) Remove() error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.removed {
		return nil
	}
	if p.closed {
		return errors.New("delete prompt file: the checkout handle is already closed")
	}
	err := p.root.Remove(planner.PromptFilename)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		p.removed = true
		return nil
	}
	fi, lerr := p.root.Lstat(planner.PromptFilename)
	if lerr == nil && fi.IsDir() {
		if rerr := p.root.RemoveAll(planner.PromptFilename); rerr == nil {
			p.removed = true
			return fmt.Errorf("the prompt file had been replaced by a directory; it was removed")
		}
	}
	return fmt.Errorf("delete prompt file %s: %w", planner.PromptFilename, err)
}

// Close releases the checkout handle.
func (p *PromptFile) Close() error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	return p.root.Close()
}

// RemoveStalePrompt deletes a prompt file left in a checkout by an apply that died.
func RemoveStalePrompt(checkout string) (bool, error) {
	root, err := os.OpenRoot(checkout)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	defer root.Close()
	if _, err := root.Lstat(planner.PromptFilename); err != nil {
		return false, nil
	}
	p := &PromptFile{root: root}
	return true, p.Remove()
}

// RemoteBranchHead is the commit a branch points at in repo, "" when the branch does not exist there.
func RemoteBranchHead(ctx context.Context, repo, branch string) (string, error) {
	if strings.HasPrefix(repo, "-") || strings.HasPrefix(branch, "-") {
		return "", fmt.Errorf("refusing to pass %q or %q to git", repo, branch)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := RunGit(ctx, "", "ls-remote", "--", repo, "refs/heads/"+branch)
	if err != nil {
		return "", err
	}
	head, _, _ := strings.Cut(out, "\t")
	return strings.TrimSpace(head), nil
}
