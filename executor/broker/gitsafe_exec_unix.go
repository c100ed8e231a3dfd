//go:build unix

package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"
)

// hostGit runs git for the broker. Every invocation names its repository with --git-dir and runs in the broker's
// own scratch directory, never in the checkout, so no file the agent wrote is ever git's configuration, hook,
// attribute or alternate. And since every repository it names holds the agent's objects, none of the host user's
// git setup applies either: a filter, hook, attributes file or fsmonitor in the host's system or global
// configuration would otherwise run on (or be steered by: .gitattributes, .lfsconfig) content the agent chose.
// Two environments exist:
//
//   - sealed: for the broker's own repositories. No system or global configuration (GIT_CONFIG_NOSYSTEM,
//     GIT_CONFIG_GLOBAL=/dev/null), HOME and XDG_CONFIG_HOME an empty directory, no system or global attributes,
//     no hooks, no fsmonitor, no pager, only the file protocol; nothing prompts.
//   - push: for the push to the remote. The same sealed configuration, except that the host's transport
//     settings (credential helpers, url.*.insteadOf, http.*, ssh command) are carried over one by one, and HOME
//     stays the host's (ssh's known_hosts and keys, credential stores), so the credentials still never enter a
//     container. Hooks, filters, attributes, submodule recursion and push signing stay off.
type hostGit struct {
	git     string   // absolute path of the git binary
	environ []string // the host environment
	dir     string   // working directory: the broker's scratch directory
	home    string   // an empty directory: HOME and XDG_CONFIG_HOME of sealed invocations
}

// sealedConfig is passed as -c to every sealed invocation. Command-line configuration is protected configuration,
// so it also governs settings that git reads only from protected scopes.
var sealedConfig = []string{
	"core.hooksPath=/dev/null",
	"core.fsmonitor=false",
	"core.attributesFile=/dev/null",
	"core.pager=cat",
	"protocol.allow=never",
	"protocol.file.allow=always",
	"credential.helper=",
	"gc.auto=0",
	"maintenance.auto=false",
}

// pushConfig is passed as -c to the push: sealedConfig without the transport restrictions the push must lift.
var pushConfig = []string{
	"core.hooksPath=/dev/null",
	"core.fsmonitor=false",
	"core.attributesFile=/dev/null",
	"core.pager=cat",
	"push.recurseSubmodules=no",
	"push.gpgSign=false",
	"gc.auto=0",
	"maintenance.auto=false",
}

// repoLocatingVars would make git operate on a repository other than the one named on the command line.
var repoLocatingVars = map[string]bool{
	"GIT_DIR": true, "GIT_WORK_TREE": true, "GIT_INDEX_FILE": true, "GIT_OBJECT_DIRECTORY": true,
	"GIT_ALTERNATE_OBJECT_DIRECTORIES": true, "GIT_COMMON_DIR": true, "GIT_NAMESPACE": true,
	"GIT_CEILING_DIRECTORIES": true, "GIT_DISCOVERY_ACROSS_FILESYSTEM": true, "GIT_QUARANTINE_PATH": true,
	"GIT_SHALLOW_FILE": true, "GIT_REPLACE_REF_BASE": true, "GIT_NO_REPLACE_OBJECTS": true, "GIT_GRAFT_FILE": true,
}

// transportVars are the host's GIT_ variables the push keeps: how it reaches and authenticates to the remote.
var transportVars = map[string]bool{
	"GIT_SSH": true, "GIT_SSH_COMMAND": true, "GIT_SSH_VARIANT": true, "GIT_ASKPASS": true, "GIT_PROXY_COMMAND": true,
	"GIT_SSL_NO_VERIFY": true, "GIT_SSL_CAINFO": true, "GIT_SSL_CAPATH": true, "GIT_SSL_CERT": true, "GIT_SSL_KEY": true,
	"GIT_SSL_CERT_PASSWORD_PROTECTED": true, "GIT_SSL_VERSION": true, "GIT_SSL_CIPHER_LIST": true,
	"GIT_HTTP_USER_AGENT": true, "GIT_HTTP_LOW_SPEED_LIMIT": true, "GIT_HTTP_LOW_SPEED_TIME": true,
	"GIT_HTTP_PROXY_AUTHMETHOD": true, "GIT_PROXY_SSL_CERT": true, "GIT_PROXY_SSL_KEY": true,
	"GIT_PROXY_SSL_CAINFO": true, "GIT_PROXY_SSL_CERT_PASSWORD_PROTECTED": true,
}

// baseEnv is the host environment without git's own variables (keep says which GIT_ ones stay) and without the
// locale, pager and editor.
func (g *hostGit) baseEnv(keep map[string]bool, drop ...string) []string {
	env := make([]string, 0, len(g.environ)+10)
	for _, kv := range g.environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "GIT_") && !keep[name] || name == "LC_ALL" || name == "PAGER" || name == "EDITOR" ||
			slices.Contains(drop, name) {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_ATTR_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0", "LC_ALL=C")
}

func (g *hostGit) sealedEnv() []string {
	home := g.home
	if home == "" {
		home = "/nonexistent"
	}
	return append(g.baseEnv(nil, "HOME", "XDG_CONFIG_HOME", "XDG_CONFIG_DIRS"),
		"HOME="+home, "XDG_CONFIG_HOME="+home, "GIT_ASKPASS=/bin/false")
}

func (g *hostGit) hostEnv() []string {
	env := make([]string, 0, len(g.environ)+2)
	for _, kv := range g.environ {
		name, _, _ := strings.Cut(kv, "=")
		if repoLocatingVars[name] || name == "GIT_TERMINAL_PROMPT" || name == "LC_ALL" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "GIT_TERMINAL_PROMPT=0", "LC_ALL=C")
}

// sealed runs git with the sealed environment.
func (g *hostGit) sealed(ctx context.Context, stdin io.Reader, args ...string) ([]byte, error) {
	full := make([]string, 0, 2*len(sealedConfig)+len(args))
	for _, c := range sealedConfig {
		full = append(full, "-c", c)
	}
	return runHostCommand(ctx, g.git, g.dir, g.sealedEnv(), stdin, append(full, args...)...)
}

// push runs `git push` from gitDir with the push environment: the host's transport settings, nothing else of its
// configuration.
func (g *hostGit) push(ctx context.Context, gitDir string, args ...string) ([]byte, error) {
	return g.remote(ctx, gitDir, append([]string{"push", "--no-recurse-submodules", "--no-signed"}, args...)...)
}

// remote runs a git command that talks to a remote (push, ls-remote) from gitDir with the push environment.
func (g *hostGit) remote(ctx context.Context, gitDir string, args ...string) ([]byte, error) {
	transport, err := g.transportConfig(ctx, gitDir)
	if err != nil {
		return nil, err
	}
	env := append(g.baseEnv(transportVars), fmt.Sprintf("GIT_CONFIG_COUNT=%d", len(transport)))
	for i, kv := range transport {
		env = append(env, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", i, kv[0]), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", i, kv[1]))
	}
	full := make([]string, 0, 2*len(pushConfig)+len(args)+1)
	for _, c := range pushConfig {
		full = append(full, "-c", c)
	}
	full = append(full, "--git-dir="+gitDir)
	return runHostCommand(ctx, g.git, g.dir, env, nil, append(full, args...)...)
}

// remoteDefaultBranch asks the remote which branch its HEAD names (git ls-remote --symref), "" for a remote
// without one (an empty repository, or a detached HEAD). Only the remote knows it, so the plan cannot check it.
func (g *hostGit) remoteDefaultBranch(ctx context.Context, gitDir, repo string) (string, error) {
	out, err := g.remote(ctx, gitDir, "ls-remote", "--symref", "--", repo, "HEAD")
	if err != nil {
		return "", fmt.Errorf("ask %s for its default branch: %w", redactURLCredentials(repo), err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		target, name, ok := strings.Cut(strings.TrimPrefix(line, "ref: "), "\t")
		if ok && strings.HasPrefix(line, "ref: ") && name == "HEAD" {
			return strings.TrimPrefix(target, "refs/heads/"), nil
		}
	}
	return "", nil
}

// transportConfig reads the host's system, global and command-line (GIT_CONFIG_COUNT) configuration and keeps
// the transport keys, in order (a later credential.helper= still resets the list). It reads configuration files
// only, never an object.
func (g *hostGit) transportConfig(ctx context.Context, gitDir string) ([][2]string, error) {
	out, err := runHostCommand(ctx, g.git, g.dir, g.hostEnv(), nil, "--git-dir="+gitDir, "config", "--list", "--null", "--show-scope")
	if err != nil {
		return nil, fmt.Errorf("read the host's git transport configuration: %w", err)
	}
	return TransportConfig(out), nil
}

// commandError is a failed host command, with its stderr trimmed and any URL credentials redacted.
type commandError struct {
	Args     []string
	ExitCode int // -1 when it did not exit normally
	Stderr   string
	Err      error
}

func (e *commandError) Error() string {
	msg := fmt.Sprintf("%s: %v", strings.Join(e.Args, " "), e.Err)
	if e.Stderr != "" {
		msg += ": " + e.Stderr
	}
	return msg
}

func (e *commandError) Unwrap() error { return e.Err }

// maxCommandOutput bounds what a host command may print on stdout; more is an error, never a silent truncation.
const maxCommandOutput = 16 << 20

// runHostCommand runs a program in its own session (so it has no controlling terminal to prompt on) and kills the
// whole process group when ctx ends.
func runHostCommand(ctx context.Context, bin, dir string, env []string, stdin io.Reader, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdin = stdin
	var stdout, stderr cappedBuffer
	stdout.max, stderr.max = maxCommandOutput, 64<<10
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if err == nil && stdout.truncated {
		err = fmt.Errorf("printed more than %d bytes", maxCommandOutput)
	}
	if err != nil {
		ce := &commandError{Args: commandSummary(bin, args), ExitCode: -1, Err: err,
			Stderr: redactURLCredentials(oneLine(stderr.String()))}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			ce.ExitCode = ee.ExitCode()
		}
		if ctx.Err() != nil {
			ce.Err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return stdout.Bytes(), ce
	}
	return stdout.Bytes(), nil
}

// commandSummary names a command for an error message: the program and its subcommand, without the sealed -c
// options and paths that only repeat what the message already says.
func commandSummary(bin string, args []string) []string {
	shown := []string{filepath.Base(bin)}
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-c":
			i++
		case strings.HasPrefix(a, "-"):
		default:
			return append(shown, redactURLCredentials(a))
		}
	}
	return shown
}

// oneLine joins a program's non-empty output lines with "; ".
func oneLine(s string) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "; ")
}

// cappedBuffer keeps the first max bytes written and discards the rest, so a chatty child cannot grow memory;
// truncated records that something was discarded.
type cappedBuffer struct {
	bytes.Buffer
	max       int
	truncated bool
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	room := b.max - b.Len()
	if room < len(p) {
		b.truncated = true
	}
	if room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

var urlCredentials = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@`)

// redactURLCredentials hides the user-info part of any URL (https://user:token@host/... -> https://***@host/...).
func redactURLCredentials(s string) string { return urlCredentials.ReplaceAllString(s, "${1}***@") }

// lookPathIn finds an executable in the PATH of environ (not the process's own PATH, which tests and callers may
// have replaced).
func lookPathIn(name string, environ []string) (string, error) {
	pathVar := ""
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathVar = v
		}
	}
	for _, dir := range filepath.SplitList(pathVar) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue // a relative PATH entry would resolve against the working directory
		}
		p := filepath.Join(dir, name)
		if isExecutableFile(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in PATH", name)
}

func isExecutableFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}
