package gitobj

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t.invalid"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestCommitFile: the commit the agent writes without git is one git accepts (fsck) and shows.
func TestCommitFile(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	os.MkdirAll(filepath.Join(src, "sub"), 0o755)
	os.WriteFile(filepath.Join(src, "README.md"), []byte("r\n"), 0o644)
	os.WriteFile(filepath.Join(src, "sub", "x"), []byte("x\n"), 0o644)
	git(t, src, "init", "-q", "-b", "main")
	git(t, src, "add", ".")
	git(t, src, "commit", "-qm", "init")
	work := filepath.Join(t.TempDir(), "work")
	git(t, filepath.Dir(work), "clone", "-q", "--no-hardlinks", src, work)

	id, err := CommitFile(work, "KEWPLAN_DEMO.md", "hello\n", "demo: add")
	if err != nil {
		t.Fatal(err)
	}
	git(t, work, "fsck", "--strict")
	if head := git(t, work, "rev-parse", "HEAD"); head != id {
		t.Errorf("HEAD %s, want the new commit %s", head, id)
	}
	if files := git(t, work, "ls-tree", "--name-only", "HEAD"); files != "KEWPLAN_DEMO.md\nREADME.md\nsub" {
		t.Errorf("tree:\n%s", files)
	}
	if body := git(t, work, "show", "HEAD:KEWPLAN_DEMO.md"); body != "hello" {
		t.Errorf("file content %q", body)
	}

	// A packed repository is refused with a clear message.
	git(t, work, "gc", "-q", "--prune=now")
	if _, err := CommitFile(work, "AGAIN.md", "x", "again"); err == nil || !strings.Contains(err.Error(), "not a loose object") {
		t.Errorf("packed repository: %v", err)
	}
	if _, err := CommitFile(work, "../escape", "x", "m"); err == nil {
		t.Error("a name with a path separator was accepted")
	}
}
