//go:build unix

package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// brokerFixture is a host-owned bare remote, a checkout cloned from it (the agent's workspace), and a sentinel
// path outside the checkout that planted configuration tries to create.
type brokerFixture struct {
	t        *testing.T
	base     string
	remote   string
	checkout string
	state    string
	sentinel string
	baseID   string
	env      []string // a clean environment for the test's own git commands
}

func requireGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
}

func newBrokerFixture(t *testing.T) *brokerFixture {
	t.Helper()
	requireGit(t)
	base := t.TempDir()
	fx := &brokerFixture{
		t:        t,
		base:     base,
		remote:   filepath.Join(base, "remote.git"),
		checkout: filepath.Join(base, "checkout"),
		state:    filepath.Join(base, "state"),
		sentinel: filepath.Join(base, "SENTINEL"),
		env: []string{
			"PATH=" + os.Getenv("PATH"),
			"HOME=" + filepath.Join(base, "home"),
			"GIT_CONFIG_NOSYSTEM=1",
			"GIT_CONFIG_GLOBAL=/dev/null",
			"GIT_AUTHOR_NAME=kew-agent", "GIT_AUTHOR_EMAIL=agent@kew.local",
			"GIT_COMMITTER_NAME=kew-agent", "GIT_COMMITTER_EMAIL=agent@kew.local",
			"GIT_AUTHOR_DATE=2026-01-02T03:04:05Z", "GIT_COMMITTER_DATE=2026-01-02T03:04:05Z",
		},
	}
	seed := filepath.Join(base, "seed")
	fx.git("", "init", "--quiet", "--bare", "--initial-branch=main", fx.remote)
	fx.git("", "init", "--quiet", "--initial-branch=main", seed)
	fx.writeFile(filepath.Join(seed, "README.md"), "hello\n")
	fx.writeFile(filepath.Join(seed, "main.go"), "package main\n")
	fx.git(seed, "add", "-A")
	fx.git(seed, "commit", "--quiet", "-m", "initial")
	fx.git(seed, "push", "--quiet", fx.remote, "main")
	fx.git("", "clone", "--quiet", "--no-local", fx.remote, fx.checkout)
	fx.baseID = strings.TrimSpace(fx.git(fx.checkout, "rev-parse", "HEAD"))
	return fx
}

// git runs a test-side git command (standing in for the agent, or for a control) and fails the test on error.
func (fx *brokerFixture) git(dir string, args ...string) string {
	fx.t.Helper()
	out, err := fx.gitErr(dir, args...)
	if err != nil {
		fx.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (fx *brokerFixture) gitErr(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = fx.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (fx *brokerFixture) writeFile(path, content string) {
	fx.t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		fx.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		fx.t.Fatal(err)
	}
}

// script writes an executable shell script that records its name in the sentinel file.
func (fx *brokerFixture) script(path, name string) string {
	fx.t.Helper()
	fx.writeFile(path, fmt.Sprintf("#!/bin/sh\necho %s >> '%s'\ncat >/dev/null 2>&1 </dev/null\nexit 0\n", name, fx.sentinel))
	if err := os.Chmod(path, 0o755); err != nil {
		fx.t.Fatal(err)
	}
	return path
}

// commit makes an agent commit in the checkout and returns its id.
func (fx *brokerFixture) commit(file, content string) string {
	fx.t.Helper()
	fx.writeFile(filepath.Join(fx.checkout, file), content)
	fx.git(fx.checkout, "add", "--", file)
	fx.git(fx.checkout, "-c", "core.hooksPath=/dev/null", "commit", "--quiet", "--no-verify", "-m", "agent: "+file)
	return strings.TrimSpace(fx.git(fx.checkout, "rev-parse", "HEAD"))
}

func (fx *brokerFixture) request() Request {
	return Request{
		Checkout:   fx.checkout,
		Repo:       fx.remote,
		BaseCommit: fx.baseID,
		Branch:     "kew/fix",
		StateDir:   fx.state,
		Environ:    fx.env,
	}
}

func (fx *brokerFixture) push(req Request) (*PushResult, error) {
	fx.t.Helper()
	return Push(context.Background(), req)
}

// remoteBranch returns the remote's kew/fix commit, or "" when the branch does not exist.
func (fx *brokerFixture) remoteBranch() string {
	fx.t.Helper()
	out, err := fx.gitErr("", "--git-dir="+fx.remote, "rev-parse", "--verify", "--quiet", "refs/heads/kew/fix")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(out)
}

func (fx *brokerFixture) sentinelFired() string {
	data, err := os.ReadFile(fx.sentinel)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// requireControl asserts that the control command made the sentinel appear, then removes it.
func (fx *brokerFixture) requireControl(what string) {
	fx.t.Helper()
	if fx.sentinelFired() == "" {
		fx.t.Fatalf("control: %s did not create the sentinel; the attack is not live", what)
	}
	if err := os.Remove(fx.sentinel); err != nil {
		fx.t.Fatal(err)
	}
}

// requirePushedSafely runs Push and asserts the agent's commit landed and no sentinel appeared.
func (fx *brokerFixture) requirePushedSafely(head string) {
	fx.t.Helper()
	res, err := fx.push(fx.request())
	if err != nil {
		fx.t.Fatalf("Push() error: %v", err)
	}
	want := &PushResult{Commit: head, Branch: "kew/fix", Pushed: true}
	if diff := cmp.Diff(want, res); diff != "" {
		fx.t.Errorf("Push() mismatch (-want +got):\n%s", diff)
	}
	if got := fx.remoteBranch(); got != head {
		fx.t.Errorf("remote kew/fix = %q, want %s", got, head)
	}
	if s := fx.sentinelFired(); s != "" {
		fx.t.Errorf("Push ran agent-planted code: the sentinel says %q", s)
	}
	fx.requireStateClean()
}

// requireRefused runs Push, expects an error containing want, nothing pushed and no sentinel.
func (fx *brokerFixture) requireRefused(want string) error {
	fx.t.Helper()
	res, err := fx.push(fx.request())
	if err == nil {
		fx.t.Fatalf("Push() = %+v, want an error", res)
	}
	fx.t.Logf("refused: %v", err)
	if !strings.Contains(err.Error(), want) {
		fx.t.Errorf("Push() error %q, want it to contain %q", err, want)
	}
	if got := fx.remoteBranch(); got != "" {
		fx.t.Errorf("remote kew/fix = %s after a refusal, want no branch", got)
	}
	if s := fx.sentinelFired(); s != "" {
		fx.t.Errorf("Push ran agent-planted code: the sentinel says %q", s)
	}
	fx.requireStateClean()
	return err
}

func (fx *brokerFixture) requireStateClean() {
	fx.t.Helper()
	entries, _ := os.ReadDir(fx.state)
	if len(entries) != 0 {
		fx.t.Errorf("the broker left %d entries in its state directory", len(entries))
	}
}

func TestBrokerPushLandsCommits(t *testing.T) {
	fx := newBrokerFixture(t)
	fx.commit("fix.go", "package main // fixed\n")
	head := fx.commit("fix_test.go", "package main\n")
	fx.requirePushedSafely(head)
	if got := fx.git("", "--git-dir="+fx.remote, "log", "--format=%s", "kew/fix"); got != "agent: fix_test.go\nagent: fix.go\ninitial\n" {
		t.Errorf("remote history %q", got)
	}
	// Pushing the same head again is a no-op that still succeeds.
	fx.requirePushedSafely(head)
}

func TestBrokerPushNoNewCommits(t *testing.T) {
	fx := newBrokerFixture(t)
	req := fx.request()
	req.PullRequest = &PullRequest{Base: "main", Title: "t"}
	res, err := fx.push(req)
	if err != nil {
		t.Fatalf("Push() error: %v", err)
	}
	want := &PushResult{Commit: fx.baseID, PullRequestSkipped: "the worker made no new commits, so there is nothing to propose"}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("Push() mismatch (-want +got):\n%s", diff)
	}
	if got := fx.remoteBranch(); got != "" {
		t.Errorf("remote kew/fix = %s, want no branch", got)
	}
}

func TestBrokerPushRefLayouts(t *testing.T) {
	t.Run("packed refs", func(t *testing.T) {
		fx := newBrokerFixture(t)
		head := fx.commit("a.go", "package a\n")
		fx.git(fx.checkout, "pack-refs", "--all", "--prune")
		if _, err := os.Lstat(filepath.Join(fx.checkout, ".git", "refs", "heads", "main")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("control: the loose ref still exists after pack-refs (%v)", err)
		}
		fx.requirePushedSafely(head)
	})
	t.Run("detached HEAD", func(t *testing.T) {
		fx := newBrokerFixture(t)
		fx.commit("a.go", "package a\n")
		fx.git(fx.checkout, "checkout", "--quiet", "--detach")
		head := fx.commit("b.go", "package b\n")
		fx.requirePushedSafely(head)
	})
	t.Run("branch with slashes", func(t *testing.T) {
		fx := newBrokerFixture(t)
		fx.git(fx.checkout, "checkout", "--quiet", "-b", "agent/work/1")
		head := fx.commit("a.go", "package a\n")
		fx.requirePushedSafely(head)
	})
	t.Run("loose objects after gc", func(t *testing.T) {
		fx := newBrokerFixture(t)
		fx.commit("a.go", "package a\n")
		fx.git(fx.checkout, "gc", "--quiet")
		head := fx.commit("b.go", "package b\n")
		fx.requirePushedSafely(head)
	})
	t.Run("shallow clone", func(t *testing.T) {
		fx := newBrokerFixture(t)
		if err := os.RemoveAll(fx.checkout); err != nil {
			t.Fatal(err)
		}
		fx.git("", "clone", "--quiet", "--depth=1", "file://"+fx.remote, fx.checkout)
		head := fx.commit("a.go", "package a\n")
		fx.requirePushedSafely(head)
	})
}

func TestBrokerPushRefusesRewrittenHistory(t *testing.T) {
	fx := newBrokerFixture(t)
	fx.git(fx.checkout, "checkout", "--quiet", "--orphan", "rewritten")
	fx.commit("only.go", "package only\n")
	fx.requireRefused("does not descend from the cloned commit")
}

func TestBrokerPushNonFastForward(t *testing.T) {
	fx := newBrokerFixture(t)
	other := fx.commit("other.go", "package other\n")
	fx.git(fx.checkout, "push", "--quiet", fx.remote, other+":refs/heads/kew/fix")
	fx.git(fx.checkout, "reset", "--quiet", "--hard", fx.baseID)
	head := fx.commit("mine.go", "package mine\n")
	_, err := fx.push(fx.request())
	if err == nil || !strings.Contains(err.Error(), "the remote branch kew/fix already has commits that "+head+" does not contain") {
		t.Fatalf("Push() error %v, want a non-fast-forward refusal", err)
	}
	if got := fx.remoteBranch(); got != other {
		t.Errorf("remote kew/fix = %s, want it left at %s", got, other)
	}
	req := fx.request()
	req.Force = true
	if res, err := fx.push(req); err != nil || !res.Pushed {
		t.Fatalf("Push(Force) = %+v, %v", res, err)
	}
	if got := fx.remoteBranch(); got != head {
		t.Errorf("remote kew/fix = %s after a forced push, want %s", got, head)
	}
}

func TestBrokerPushRequestValidation(t *testing.T) {
	fx := newBrokerFixture(t)
	tests := []struct {
		name   string
		modify func(*Request)
		want   string
	}{
		{"relative checkout", func(r *Request) { r.Checkout = "checkout" }, `checkout "checkout" must be an absolute path`},
		{"no state dir", func(r *Request) { r.StateDir = "" }, "no state directory"},
		{"option as repo", func(r *Request) { r.Repo = "--upload-pack=touch x" }, `repository "--upload-pack=touch x" is not a remote git can push to`},
		{"relative repo", func(r *Request) { r.Repo = "remote.git" }, `repository path "remote.git" must be absolute`},
		{"short base", func(r *Request) { r.BaseCommit = "abc" }, `base commit "abc" is not a 40-hex commit id`},
		{"no branch", func(r *Request) { r.Branch = "" }, "no branch to push to"},
		{"bad branch", func(r *Request) { r.Branch = "kew/../x" }, `branch "kew/../x": ref name "refs/heads/kew/../x" is not valid`},
		{"branch with a colon", func(r *Request) { r.Branch = "a:refs/heads/main" }, `is not valid: it contains a space, a control character or one of ~^:?*[\`},
		{"credentials are redacted", func(r *Request) { r.Repo = "-https://user:s3cret@example.com/r" }, `repository "-https://***@example.com/r"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := fx.request()
			tt.modify(&req)
			_, err := Push(context.Background(), req)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Push() error %v, want it to contain %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error %q shows a credential", err)
			}
		})
	}
}

func TestBrokerPushContextCancelled(t *testing.T) {
	fx := newBrokerFixture(t)
	fx.commit("a.go", "package a\n")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Push(ctx, fx.request()); err == nil {
		t.Fatal("Push(cancelled) succeeded")
	}
	if got := fx.remoteBranch(); got != "" {
		t.Errorf("remote kew/fix = %s after a cancelled push", got)
	}
}

// fakeGH installs a gh stand-in that logs its arguments and answers auth status with the given exit code.
func fakeGH(t *testing.T, fx *brokerFixture, authExit int) (binDir, logPath string) {
	t.Helper()
	binDir = filepath.Join(fx.base, "bin")
	logPath = filepath.Join(fx.base, "gh.log")
	fx.writeFile(filepath.Join(binDir, "gh"), fmt.Sprintf(`#!/bin/sh
printf '%%s|' "$@" >> '%s'; echo >> '%s'
case "$1 $2" in
"auth status") [ %d -eq 0 ] || echo "You are not logged into any GitHub hosts." >&2; exit %d ;;
"pr create") echo "Creating pull request..." >&2; echo "https://github.com/acme/widget/pull/7"; exit 0 ;;
esac
exit 2
`, logPath, logPath, authExit, authExit))
	if err := os.Chmod(filepath.Join(binDir, "gh"), 0o755); err != nil {
		t.Fatal(err)
	}
	return binDir, logPath
}

func TestBrokerPushPullRequest(t *testing.T) {
	// The request names a GitHub URL; the host's own git configuration (here through GIT_CONFIG_* variables)
	// rewrites it to the local bare remote, which also shows that the push uses the host's configuration.
	const githubURL = "https://github.com/acme/widget.git"
	hostConfig := func(fx *brokerFixture) []string {
		return []string{"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=url." + fx.remote + ".insteadOf", "GIT_CONFIG_VALUE_0=" + githubURL}
	}
	t.Run("opened", func(t *testing.T) {
		fx := newBrokerFixture(t)
		head := fx.commit("a.go", "package a\n")
		binDir, logPath := fakeGH(t, fx, 0)
		req := fx.request()
		req.Repo = githubURL
		req.Environ = append(append([]string{"PATH=" + binDir + ":" + os.Getenv("PATH")}, fx.env[1:]...), hostConfig(fx)...)
		req.PullRequest = &PullRequest{Base: "main", Title: "Fix the widget"}
		res, err := fx.push(req)
		if err != nil {
			t.Fatalf("Push() error: %v", err)
		}
		want := &PushResult{Commit: head, Branch: "kew/fix", Pushed: true, PullRequest: "https://github.com/acme/widget/pull/7"}
		if diff := cmp.Diff(want, res); diff != "" {
			t.Errorf("Push() mismatch (-want +got):\n%s", diff)
		}
		log, _ := os.ReadFile(logPath)
		wantLog := "auth|status|--hostname|github.com|\n" +
			"pr|create|--repo|github.com/acme/widget|--head|kew/fix|--title|Fix the widget|--body|Pushed by kewplan's host broker from commit " + head + ".|--base|main|\n"
		if diff := cmp.Diff(wantLog, string(log)); diff != "" {
			t.Errorf("gh invocations mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("not authenticated", func(t *testing.T) {
		fx := newBrokerFixture(t)
		fx.commit("a.go", "package a\n")
		binDir, _ := fakeGH(t, fx, 1)
		req := fx.request()
		req.Repo = githubURL
		req.Environ = append(append([]string{"PATH=" + binDir + ":" + os.Getenv("PATH")}, fx.env[1:]...), hostConfig(fx)...)
		req.PullRequest = &PullRequest{Title: "t"}
		res, err := fx.push(req)
		if err != nil || !res.Pushed {
			t.Fatalf("Push() = %+v, %v; want the push to stand", res, err)
		}
		if res.PullRequest != "" || !strings.HasPrefix(res.PullRequestSkipped, "gh is not authenticated for github.com (run `gh auth login`)") {
			t.Errorf("PullRequest %q, skipped %q", res.PullRequest, res.PullRequestSkipped)
		}
	})
	t.Run("gh not installed", func(t *testing.T) {
		fx := newBrokerFixture(t)
		fx.commit("a.go", "package a\n")
		gitDir := filepath.Join(fx.base, "gitonly")
		gitPath, _ := exec.LookPath("git")
		if err := os.MkdirAll(gitDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(gitPath, filepath.Join(gitDir, "git")); err != nil {
			t.Fatal(err)
		}
		req := fx.request()
		req.Environ = append([]string{"PATH=" + gitDir}, fx.env[1:]...)
		req.PullRequest = &PullRequest{Title: "t"}
		res, err := fx.push(req)
		if err != nil || !res.Pushed {
			t.Fatalf("Push() = %+v, %v", res, err)
		}
		want := "gh is not installed (not found in PATH); open a pull request from branch kew/fix by hand"
		if diff := cmp.Diff(want, res.PullRequestSkipped); diff != "" {
			t.Errorf("PullRequestSkipped mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("not a hosted repository", func(t *testing.T) {
		fx := newBrokerFixture(t)
		fx.commit("a.go", "package a\n")
		binDir, logPath := fakeGH(t, fx, 0)
		req := fx.request()
		req.Environ = append([]string{"PATH=" + binDir + ":" + os.Getenv("PATH")}, fx.env[1:]...)
		req.PullRequest = &PullRequest{Title: "t"}
		res, err := fx.push(req)
		if err != nil || !res.Pushed {
			t.Fatalf("Push() = %+v, %v", res, err)
		}
		if !strings.HasSuffix(res.PullRequestSkipped, "is not a hosted repository URL, so gh cannot open a pull request for it") {
			t.Errorf("PullRequestSkipped %q", res.PullRequestSkipped)
		}
		if _, err := os.Stat(logPath); err == nil {
			t.Error("gh was run for a local repository")
		}
	})
}

func TestGithubRepo(t *testing.T) {
	tests := []struct {
		in         string
		host, repo string
		ok         bool
	}{
		{"https://github.com/acme/widget.git", "github.com", "acme/widget", true},
		{"https://user:tok@github.com/acme/widget", "github.com", "acme/widget", true},
		{"ssh://git@ghe.example.com/acme/widget.git", "ghe.example.com", "acme/widget", true},
		{"git@github.com:acme/widget.git", "github.com", "acme/widget", true},
		{"/srv/git/widget.git", "", "", false},
		{"file:///srv/git/acme/widget.git", "", "", false},
		{"https://github.com/acme", "", "", false},
	}
	for _, tt := range tests {
		host, repo, ok := githubRepo(tt.in)
		if diff := cmp.Diff([]any{tt.host, tt.repo, tt.ok}, []any{host, repo, ok}); diff != "" {
			t.Errorf("githubRepo(%q) mismatch (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestRedactURLCredentials(t *testing.T) {
	got := redactURLCredentials("fatal: unable to access 'https://x-access-token:ghp_abc@github.com/a/b.git/': 403")
	if diff := cmp.Diff("fatal: unable to access 'https://***@github.com/a/b.git/': 403", got); diff != "" {
		t.Errorf("redactURLCredentials() mismatch (-want +got):\n%s", diff)
	}
}

// openPTY returns a pseudo-terminal pair, so that a control can run git with a terminal on stdout (git starts
// its pager only then).
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		t.Skipf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		t.Skipf("pty number: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Skipf("open pty: %v", err)
	}
	return m, s
}

// gitOnTerminal runs git in dir with stdout on a terminal, the way a person at a shell would.
func (fx *brokerFixture) gitOnTerminal(dir string, args ...string) {
	fx.t.Helper()
	m, s := openPTY(fx.t)
	defer m.Close()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(fx.env, "TERM=dumb")
	cmd.Stdout, cmd.Stderr = s, s
	drained := make(chan struct{})
	go func() { io.Copy(io.Discard, m); close(drained) }()
	err := cmd.Run()
	s.Close()
	m.Close()
	<-drained
	if err != nil {
		fx.t.Logf("control git %s: %v", strings.Join(args, " "), err)
	}
}

// TestBrokerBeforePushAndRemoteBranch: BeforePush hears the exact commit before the remote has it, an error from
// it stops the push, and RemoteBranch then tells what the remote's branch holds.
func TestBrokerBeforePushAndRemoteBranch(t *testing.T) {
	fx := newBrokerFixture(t)
	head := fx.commit("fix.go", "package main // fixed\n")
	ask := func() string {
		t.Helper()
		got, err := RemoteBranch(context.Background(), BranchRequest{Repo: fx.remote, Branch: "kew/fix", StateDir: fx.state, Environ: fx.env})
		if err != nil {
			t.Fatalf("RemoteBranch() = %v", err)
		}
		return got
	}
	req := fx.request()
	req.BeforePush = func(commit string) error { return errors.New("the ledger is read-only") }
	if _, err := fx.push(req); err == nil || !strings.Contains(err.Error(), "nothing was pushed: the ledger is read-only") {
		t.Errorf("Push() with a failing BeforePush = %v, want nothing pushed", err)
	}
	if got := ask(); got != "" {
		t.Errorf("RemoteBranch() after a stopped push = %q, want no branch", got)
	}
	var heard, remoteThen string
	req.BeforePush = func(commit string) error {
		heard, remoteThen = commit, fx.remoteBranch()
		return nil
	}
	if _, err := fx.push(req); err != nil {
		t.Fatal(err)
	}
	if heard != head || remoteThen != "" {
		t.Errorf("BeforePush heard %q while the remote held %q; want %q before the remote had anything", heard, remoteThen, head)
	}
	if got := ask(); got != head {
		t.Errorf("RemoteBranch() = %q, want the pushed %q", got, head)
	}
	if _, err := RemoteBranch(context.Background(), BranchRequest{Repo: filepath.Join(fx.base, "missing.git"), Branch: "kew/fix", StateDir: fx.state, Environ: fx.env}); err == nil {
		t.Error("RemoteBranch() of a missing remote succeeded, want an error")
	}
	fx.requireStateClean()
}
