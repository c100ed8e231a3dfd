// Package testkit is what kewplan's tests share around the engine: the Docker engine or a skip (a failure when CI
// is set), a throwaway git repository, and the rule that a missing prerequisite skips locally and fails under CI.
// Golden files are internal/testtools/golden's, which imports no kewplan package. Only tests import it.
package testkit

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/kewplan/kewplan/executor/engine"
)

// Need skips the test with msg, or fails it when CI is set: in CI every prerequisite must be there, so a test that
// would skip is a failure, never a pass.
func Need(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatal("CI is set, so this test must run, but " + msg)
	}
	t.Skip("skipping: " + msg)
}

// Engine connects to the Docker engine of the environment (DOCKER_HOST), closed when the test ends; without one it
// skips (locally) or fails (CI).
func Engine(t testing.TB) *engine.Engine {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	eng, err := engine.Connect(ctx, os.Environ())
	if err != nil {
		Need(t, fmt.Sprintf("it needs a Docker engine and none answered (%v); start dockerd or set DOCKER_HOST", err))
	}
	t.Cleanup(func() { eng.Close() })
	return eng
}

// GitRepo is a fresh repository with one commit of README.md on branch main, made without the machine's git
// configuration.
func GitRepo(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "origin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("# test repository\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"init", "--quiet", "--initial-branch=main"},
		{"add", "README.md"},
		{"-c", "user.name=kewplan test", "-c", "user.email=test@kewplan.invalid", "commit", "--quiet", "-m", "initial"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", args[0], err, out)
		}
	}
	return dir
}
