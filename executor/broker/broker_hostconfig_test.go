//go:build unix

package broker

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBrokerHostConfigNeverMeetsAgentCommits: the host user's own git setup (a filter driver, hooks, an
// attributes file and an fsmonitor in the global and the system configuration, here a temporary HOME,
// GIT_CONFIG_GLOBAL and GIT_CONFIG_SYSTEM of the test process) never runs on the agent's commits, and a committed
// .gitattributes and .lfsconfig make the host neither run a filter nor reach the URL the agent chose. The host's
// transport settings still apply: the remote is reached through a global url.*.insteadOf.
func TestBrokerHostConfigNeverMeetsAgentCommits(t *testing.T) {
	fx := newBrokerFixture(t)

	// A loopback listener stands for the URL the agent names in .lfsconfig: nothing may connect to it.
	lfs, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lfs.Close()
	lfsURL := "http://" + lfs.Addr().String() + "/agent-chosen"

	hostHome := filepath.Join(fx.base, "hosthome")
	hooks := filepath.Join(hostHome, "hooks")
	for _, h := range []string{"pre-commit", "pre-push", "reference-transaction", "post-update", "pre-receive",
		"update", "post-receive", "push-to-checkout", "pre-auto-gc", "post-checkout"} {
		fx.script(filepath.Join(hooks, h), "hook-"+h)
	}
	filter := fx.script(filepath.Join(hostHome, "bin", "filter"), "filter")
	textconv := fx.script(filepath.Join(hostHome, "bin", "textconv"), "textconv")
	fsmonitor := fx.script(filepath.Join(hostHome, "bin", "fsmonitor"), "fsmonitor")
	attributes := filepath.Join(hostHome, "attributes")
	fx.writeFile(attributes, "* filter=lfs diff=evil\n")
	fx.writeFile(filepath.Join(hostHome, ".config", "git", "attributes"), "* filter=lfs diff=evil\n")
	const remoteURL = "https://example.invalid/acme/widget.git"
	drivers := fmt.Sprintf(`[filter "lfs"]
	clean = %[1]s
	smudge = %[1]s
	process = %[1]s
	required = true
[diff "evil"]
	textconv = %[2]s
	command = %[2]s
[core]
	hooksPath = %[3]s
	fsmonitor = %[4]s
	attributesFile = %[5]s
[lfs]
	url = %[6]s
`, filter, textconv, hooks, fsmonitor, attributes, lfsURL)
	global := filepath.Join(hostHome, ".gitconfig")
	fx.writeFile(global, drivers+fmt.Sprintf("[url %q]\n\tinsteadOf = %s\n", fx.remote, remoteURL))
	system := filepath.Join(hostHome, "system.gitconfig")
	fx.writeFile(system, drivers)
	t.Setenv("HOME", hostHome)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(hostHome, ".config"))
	t.Setenv("GIT_CONFIG_GLOBAL", global)
	t.Setenv("GIT_CONFIG_SYSTEM", system)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "")

	// Control: with this environment, plain git runs the filter and the hooks.
	ctl := filepath.Join(fx.base, "control")
	run := func(dir string, args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=c", "GIT_AUTHOR_EMAIL=c@c", "GIT_COMMITTER_NAME=c", "GIT_COMMITTER_EMAIL=c@c")
		_, _ = cmd.CombinedOutput()
	}
	run("", "init", "--quiet", ctl)
	fx.writeFile(filepath.Join(ctl, "a.txt"), "content\n")
	run(ctl, "add", "a.txt")
	run(ctl, "commit", "--quiet", "--allow-empty", "-m", "control")
	if s := fx.sentinelFired(); !strings.Contains(s, "filter") || !strings.Contains(s, "hook-pre-commit") {
		t.Fatalf("control: the host's global filter and hooks did not run under plain git (sentinel %q); the test is not live", s)
	}
	fx.requireControl("git add and git commit with the host's global configuration")

	// The agent commits an LFS-style tree pointing at its own URL.
	fx.writeFile(filepath.Join(fx.checkout, ".gitattributes"), "* filter=lfs diff=lfs merge=lfs -text\n")
	fx.writeFile(filepath.Join(fx.checkout, ".lfsconfig"), "[lfs]\n\turl = "+lfsURL+"\n")
	fx.git(fx.checkout, "add", ".gitattributes", ".lfsconfig")
	head := fx.commit("blob.bin", "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12\n")

	req := fx.request()
	req.Environ = nil // the test process's environment, as apply passes it
	req.Repo = remoteURL
	res, err := Push(t.Context(), req)
	if err != nil {
		t.Fatalf("Push() error: %v", err)
	}
	if !res.Pushed || res.Commit != head {
		t.Errorf("Push() = %+v, want %s pushed", res, head)
	}
	if got := fx.remoteBranch(); got != head {
		t.Errorf("remote kew/fix = %q, want %s (through the host's global url.insteadOf)", got, head)
	}
	if s := fx.sentinelFired(); s != "" {
		t.Errorf("Push ran the host's own git setup on the agent's commits: the sentinel says %q", s)
	}
	if err := lfs.(*net.TCPListener).SetDeadline(time.Now()); err != nil {
		t.Fatal(err)
	}
	if c, err := lfs.Accept(); err == nil {
		c.Close()
		t.Errorf("something connected to the URL the agent put in .lfsconfig")
	} else if ne := (net.Error)(nil); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatal(err)
	}
	fx.requireStateClean()
}
