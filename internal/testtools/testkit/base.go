package testkit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/kewplan/kewplan/executor/engine"
)

// baseRecipe is the base's debootstrap command line without the target directory and the mirror, and
// baseChanges the configuration `docker import` applies. Their hash names the base's tag: a changed recipe
// builds a new base, an unchanged one is never rebuilt. bash and passwd are what debian:bookworm-slim has and the
// Dockerfile uses (SHELL, useradd); git, jq, procps, curl and ca-certificates are the contract's tooling.
var (
	baseRecipe  = []string{"--variant=minbase", "--include=bash,ca-certificates,curl,git,jq,passwd,procps", "bookworm"}
	baseChanges = []string{"ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", `CMD ["/bin/bash"]`}
)

func TestBaseTag() string {
	h := sha256.New()
	fmt.Fprintf(h, "%q %q %s", baseRecipe, baseChanges, runtime.GOARCH)
	return "kewplan-test/bookworm-base:" + hex.EncodeToString(h.Sum(nil))[:12]
}

// debianMirror is KEWPLAN_DEBIAN_MIRROR, else the first Debian archive URI in the host's apt sources, else
// deb.debian.org.
func debianMirror() string {
	if m := os.Getenv("KEWPLAN_DEBIAN_MIRROR"); m != "" {
		return m
	}
	files, _ := filepath.Glob("/etc/apt/sources.list.d/*")
	files = append([]string{"/etc/apt/sources.list"}, files...)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			fields := strings.Fields(line)
			var uri string
			switch {
			case len(fields) >= 2 && fields[0] == "URIs:":
				uri = fields[1]
			case len(fields) >= 3 && fields[0] == "deb" && !strings.HasPrefix(fields[1], "["):
				uri = fields[1]
			}
			if strings.HasSuffix(strings.TrimSuffix(uri, "/"), "/debian") {
				return uri
			}
		}
	}
	return "http://deb.debian.org/debian"
}

// CannotBuildError says an image cannot be built on this machine; the tests skip with it (under CI it is never
// returned: cannotBuild makes it a plain error, a failure).
type CannotBuildError struct{ Msg string }

func (e CannotBuildError) Error() string { return e.Msg }

func cannotBuild(format string, args ...any) error {
	if os.Getenv("CI") != "" {
		return fmt.Errorf("CI is set: "+format, args...)
	}
	return CannotBuildError{fmt.Sprintf(format, args...)}
}

// EnsureTestBase builds the test base (Debian bookworm by debootstrap, with bash, git, curl, jq and
// ca-certificates) unless the engine already has it, and returns its tag.
func EnsureTestBase(logf func(string, ...any), eng *engine.Engine) (string, error) {
	tag := TestBaseTag()
	ctx := context.Background()
	if ok, err := eng.ImageExists(ctx, tag); err != nil || ok {
		return tag, err
	}
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "kewplan-test-base.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if ok, err := eng.ImageExists(ctx, tag); err != nil || ok { // another test binary may have built it meanwhile
		return tag, err
	}

	debootstrap, err := exec.LookPath("debootstrap")
	if err != nil {
		return "", cannotBuild("the test base %s is not in the engine, and debootstrap is not installed to build it (apt-get install debootstrap, then make test-base)", tag)
	}
	if os.Geteuid() != 0 {
		return "", cannotBuild("the test base %s is not in the engine, and debootstrap needs root to build it: run make test-base as root once", tag)
	}
	root, err := os.MkdirTemp("", "kewplan-debootstrap-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(root)
	start := time.Now()
	args := append(append([]string{}, baseRecipe...), root, debianMirror())
	logf("building the test base %s: debootstrap %s (the first run on this machine only)", tag, strings.Join(args, " "))
	if out, err := exec.Command(debootstrap, args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("debootstrap %s: %v\n%s", strings.Join(args, " "), err, tailLines(string(out), 30))
	}
	logf("debootstrap took %s", time.Since(start).Round(time.Second))
	for _, junk := range []string{"var/cache/apt/archives", "var/lib/apt/lists"} {
		entries, _ := os.ReadDir(filepath.Join(root, junk))
		for _, e := range entries {
			if e.Name() != "partial" && e.Name() != "lock" {
				os.RemoveAll(filepath.Join(root, junk, e.Name()))
			}
		}
	}
	tarCmd := exec.Command("tar", "--numeric-owner", "--exclude=./dev/*", "--exclude=./proc/*", "--exclude=./sys/*", "-C", root, "-cf", "-", ".")
	stdout, err := tarCmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	var tarErr strings.Builder
	tarCmd.Stderr = &tarErr
	if err := tarCmd.Start(); err != nil {
		return "", err
	}
	importErr := eng.ImportImage(ctx, tag, stdout, baseChanges)
	if err := tarCmd.Wait(); err != nil {
		return "", fmt.Errorf("tar the debootstrap root: %v: %s", err, tarErr.String())
	}
	if importErr != nil {
		return "", importErr
	}
	logf("test base %s built in %s", tag, time.Since(start).Round(time.Second))
	return tag, nil
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
