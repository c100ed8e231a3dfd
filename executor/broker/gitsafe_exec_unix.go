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
	"strings"
	"syscall"
	"time"
)

// hostGit runs git for the broker. Every invocation names its repository with --git-dir and runs in the broker's
// own scratch directory, never in the checkout, so no file the agent wrote is ever git's configuration, hook,
// attribute or alternate. Two environments exist:
//
//   - sealed: for the broker's own repositories. No system or global configuration, no hooks, no fsmonitor, no
//     pager, and only the file protocol; nothing of the host user's setup applies, nothing prompts.
//   - host: for the push and for gh. The host's own configuration and credential helpers apply (the credentials
//     never enter a container), minus variables that would point git at some other repository.
type hostGit struct {
	git     string   // absolute path of the git binary
	environ []string // the host environment
	dir     string   // working directory: the broker's scratch directory
}

// sealedConfig is passed as -c to every sealed invocation. Command-line configuration is protected configuration,
// so it also governs settings that git reads only from protected scopes.
var sealedConfig = []string{
	"core.hooksPath=/dev/null",
	"core.fsmonitor=false",
	"core.pager=cat",
	"protocol.allow=never",
	"protocol.file.allow=always",
	"credential.helper=",
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

func (g *hostGit) sealedEnv() []string {
	env := make([]string, 0, len(g.environ)+6)
	for _, kv := range g.environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "GIT_") || name == "LC_ALL" || name == "PAGER" || name == "EDITOR" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0",
		"GIT_ASKPASS=/bin/false", "GIT_OPTIONAL_LOCKS=0", "LC_ALL=C")
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

// host runs git with the host's own configuration.
func (g *hostGit) host(ctx context.Context, args ...string) ([]byte, error) {
	return runHostCommand(ctx, g.git, g.dir, g.hostEnv(), nil, args...)
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
