//go:build linux

package conform

// The images smoke and conform are tested against. Nothing can be pulled, so they are built here:
//
//   - the base: Debian bookworm made by debootstrap and `docker import`, tagged by the hash of its recipe, built
//     once per machine (the tag is the cache) under a file lock so concurrent test binaries do not race;
//   - the test variants of docker/agent.Dockerfile and docker/opencode.Dockerfile: the same Dockerfiles and
//     entrypoints, built offline on that base (INSTALL_PACKAGES=0, AGENT_INSTALL=none, target test) with a static
//     stand-in binary in place of the agent CLI;
//   - the broken variants, each FROM the claude test variant with one thing wrong.
//
// Images are built once per test binary and tagged by the hash of what went into them.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kewplan/kewplan/executor/engine"
	"github.com/kewplan/kewplan/internal/testtools/testkit"
)

// conformEngine connects to the engine, or skips (fails under CI) when none answers.
func conformEngine(t *testing.T) *engine.Engine { return testkit.Engine(t) }

// testImageSet is every image the smoke and conform tests use.
type testImageSet struct {
	Claude   string            // the claude test variant of docker/agent.Dockerfile
	Opencode string            // the opencode test variant of docker/opencode.Dockerfile
	Broken   map[string]string // broken variant name -> tag
}

var (
	testImagesOnce sync.Once
	testImagesVal  *testImageSet
	testImagesErr  error
)

// brokenVariant is one deliberately broken image: FROM the claude test variant, with extra Dockerfile lines and,
// when edit is set, the reference entrypoint edited. Row is the one conform row it must fail (0: see its test).
type brokenVariant struct {
	Name       string
	Row        int
	Dockerfile string
	Edit       func(entrypoint string) (string, error)
}

// replaceOnce edits the reference entrypoint, failing loudly when the anchor is gone (the entrypoint changed and
// the variant would silently test nothing).
func replaceOnce(old, new string) func(string) (string, error) {
	return func(s string) (string, error) {
		if strings.Count(s, old) != 1 {
			return "", fmt.Errorf("the reference entrypoint no longer contains %q exactly once", old)
		}
		return strings.Replace(s, old, new, 1), nil
	}
}

const referenceExec = `exec claude --print "$@" <"$PROMPT_FILE"`

// fakeBakedKey is the value of the baked credential variant; no report may ever print it.
const fakeBakedKey = "sk-ant-api03-kewplan-test-baked-value-not-real"

var brokenVariants = []brokenVariant{
	{Name: "root", Row: RowImage, Dockerfile: "USER root\n"},
	{Name: "uid1000", Row: RowImage, Dockerfile: "USER root\nRUN usermod -u 1000 agent && groupmod -g 1000 agent && chown -R 1000:1000 /work /home/agent\nUSER agent\n"},
	{Name: "prose-on-stdout", Row: RowStdout, Edit: replaceOnce(referenceExec, "echo \"kew-agent: starting claude\"\n"+referenceExec)},
	{Name: "hardcoded-model", Row: RowHandoff, Edit: replaceOnce(referenceExec, `exec claude --print --model claude-opus-4-1 "$@" <"$PROMPT_FILE"`)},
	{Name: "prompt-in-argv", Row: RowHandoff, Edit: replaceOnce(referenceExec, `exec claude --print "$@" "$(cat "$PROMPT_FILE")" </dev/null`)},
	{Name: "starts-without-prompt", Row: RowPromptMissing, Edit: func(s string) (string, error) {
		start := strings.Index(s, `if [ ! -f "$PROMPT_FILE" ]; then`)
		end := strings.Index(s, "git config --global --add safe.directory /work")
		if start < 0 || end < start {
			return "", errors.New("the reference entrypoint's prompt checks moved")
		}
		s = s[:start] + s[end:]
		return replaceOnce(referenceExec, `if [ -s "$PROMPT_FILE" ]; then `+referenceExec+"; fi\nexec claude --print \"$@\" </dev/null")(s)
	}},
	{Name: "ignores-prompt-override", Row: RowHandoff, Edit: replaceOnce(`PROMPT_FILE="${KEW_PROMPT_FILE:-/work/.kew-prompt.txt}"`, `PROMPT_FILE=/work/.kew-prompt.txt`)},
	{Name: "writes-outside-work", Row: RowHardening,
		Dockerfile: "USER root\nRUN install -d -o agent -g agent /var/lib/kew-agent\nUSER agent\n",
		Edit:       replaceOnce(referenceExec, "date >/var/lib/kew-agent/last-start\n"+referenceExec)},
	{Name: "baked-api-key", Row: RowImage, Dockerfile: "ENV ANTHROPIC_API_KEY=" + fakeBakedKey + "\n"},
	// Not broken, but unobservable: the probe on PATH cannot intercept an agent called by absolute path (Row 0).
	{Name: "absolute-agent-path", Edit: replaceOnce(referenceExec, `exec /usr/local/bin/claude --print "$@" <"$PROMPT_FILE"`)},
}

// conformTestImages builds (once per test binary) and returns the test images, skipping when they cannot be
// built on this machine.
func conformTestImages(t *testing.T) (*engine.Engine, *testImageSet) {
	t.Helper()
	eng := conformEngine(t)
	testImagesOnce.Do(func() {
		start := time.Now()
		testImagesVal, testImagesErr = buildTestImages(t.Logf, eng)
		t.Logf("test images ready in %s", time.Since(start).Round(time.Millisecond))
	})
	var skip testkit.CannotBuildError
	if errors.As(testImagesErr, &skip) {
		t.Skip(skip.Msg)
	}
	if testImagesErr != nil {
		t.Fatalf("building the test images: %v", testImagesErr)
	}
	return eng, testImagesVal
}

func buildTestImages(logf func(string, ...any), eng *engine.Engine) (*testImageSet, error) {
	base, err := testkit.EnsureTestBase(logf, eng)
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	standin, err := buildStandin()
	if err != nil {
		return nil, err
	}
	set := &testImageSet{Broken: map[string]string{}}
	for _, v := range []struct {
		dockerfile, entrypoint string
		out                    *string
	}{
		{"agent.Dockerfile", "agent-entrypoint.sh", &set.Claude},
		{"opencode.Dockerfile", "opencode-entrypoint.sh", &set.Opencode},
	} {
		df, err := os.ReadFile(filepath.Join("..", "..", "docker", v.dockerfile))
		if err != nil {
			return nil, err
		}
		ep, err := os.ReadFile(filepath.Join("..", "..", "docker", v.entrypoint))
		if err != nil {
			return nil, err
		}
		spec := engine.BuildSpec{
			Dockerfile: v.dockerfile, Target: "test",
			Args:        map[string]string{"BASE": base, "INSTALL_PACKAGES": "0", "AGENT_INSTALL": "none"},
			Files:       map[string][]byte{v.dockerfile: df, v.entrypoint: ep, "agent-stand-in": standin},
			Executables: map[string]bool{v.entrypoint: true, "agent-stand-in": true},
		}
		spec.Tag = "kewplan-test/" + strings.TrimSuffix(v.dockerfile, ".Dockerfile") + ":" + specHash(spec)
		if err := buildOnce(ctx, logf, eng, spec); err != nil {
			return nil, err
		}
		*v.out = spec.Tag
	}
	reference, err := os.ReadFile(filepath.Join("..", "..", "docker", "agent-entrypoint.sh"))
	if err != nil {
		return nil, err
	}
	for _, b := range brokenVariants {
		df := "FROM " + set.Claude + "\n" + b.Dockerfile
		files := map[string][]byte{}
		if b.Edit != nil {
			ep, err := b.Edit(string(reference))
			if err != nil {
				return nil, fmt.Errorf("variant %s: %w", b.Name, err)
			}
			files["entrypoint.sh"] = []byte(ep)
			df += "COPY entrypoint.sh /usr/local/bin/kew-agent-entrypoint\n"
		}
		files["Dockerfile"] = []byte(df)
		spec := engine.BuildSpec{Dockerfile: "Dockerfile", Files: files, Executables: map[string]bool{"entrypoint.sh": true}}
		spec.Tag = "kewplan-test/broken-" + b.Name + ":" + specHash(spec)
		if err := buildOnce(ctx, logf, eng, spec); err != nil {
			return nil, fmt.Errorf("variant %s: %w", b.Name, err)
		}
		set.Broken[b.Name] = spec.Tag
	}
	return set, nil
}

// buildOnce builds spec unless the engine already has its tag: tags are the hash of everything that goes into
// the image (the base's tag included), so an existing tag is the same image.
func buildOnce(ctx context.Context, logf func(string, ...any), eng *engine.Engine, spec engine.BuildSpec) error {
	if ok, err := eng.ImageExists(ctx, spec.Tag); err != nil || ok {
		return err
	}
	start := time.Now()
	if err := eng.Build(ctx, spec); err != nil {
		return err
	}
	logf("built %s in %s", spec.Tag, time.Since(start).Round(time.Millisecond))
	return nil
}

func specHash(s engine.BuildSpec) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", s.Dockerfile, s.Target)
	keys := make([]string, 0, len(s.Args))
	for k := range s.Args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(h, "arg %s=%s\x00", k, s.Args[k])
	}
	names := make([]string, 0, len(s.Files))
	for n := range s.Files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(h, "file %s %v %d\x00", n, s.Executables[n], len(s.Files[n]))
		h.Write(s.Files[n])
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// buildStandin compiles the agent stand-in as a static Linux binary for the engine's architecture.
func buildStandin() ([]byte, error) {
	dir, err := os.MkdirTemp("", "kewplan-standin-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "agent-stand-in")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w -buildid=", "-o", out, "./testdata/images/standin")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build the agent stand-in: %v\n%s", err, b)
	}
	return os.ReadFile(out)
}
