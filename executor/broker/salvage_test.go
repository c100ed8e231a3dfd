//go:build unix

package broker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kewplan/kewplan/planner"
)

func (fx *brokerFixture) salvage(dest string) *SalvageResult {
	fx.t.Helper()
	res, err := Salvage(context.Background(), SalvageRequest{Checkout: fx.checkout, BaseCommit: fx.baseID, Dest: dest,
		StateDir: fx.state, Environ: fx.env, Message: "node fix, kept because the budget was reached"})
	if err != nil {
		fx.t.Fatalf("Salvage() error: %v", err)
	}
	return res
}

// TestSalvageKeepsCommitsAndEditsThenPublishes: two commits and an edit survive as a bundle and a patch; the
// publish pushes both commits and a host-made commit of the edit, with neither the prompt file nor the sidecar in
// any commit, and the bundle is readable by a plain git fetch.
func TestSalvageKeepsCommitsAndEditsThenPublishes(t *testing.T) {
	fx := newBrokerFixture(t)
	first := fx.commit("a.txt", "one\n")
	second := fx.commit("b.txt", "two\n")
	fx.writeFile(filepath.Join(fx.checkout, "README.md"), "hello, edited\n")
	fx.writeFile(filepath.Join(fx.checkout, "new", "c.txt"), "three\n")
	if err := os.Remove(filepath.Join(fx.checkout, "main.go")); err != nil {
		t.Fatal(err)
	}
	fx.writeFile(filepath.Join(fx.checkout, planner.PromptFilename), "the secret prompt\n")
	fx.writeFile(filepath.Join(fx.checkout, "sub", planner.VerdictFilename), "{}\n")

	dest := filepath.Join(fx.base, "salvage", "fix")
	res := fx.salvage(dest)
	if !res.Kept || res.Head != second || res.Commits != 2 || res.Worktree == "" || res.FilesChanged != 3 || res.CommitsLost != "" {
		t.Fatalf("Salvage() = %+v, want 2 commits up to %s and 3 files changed", res, second)
	}
	if len(res.Skipped) != 0 {
		t.Errorf("skipped %v, want nothing named (the prompt and the sidecar are left out silently)", res.Skipped)
	}
	patch, err := os.ReadFile(res.Patch)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"+hello, edited", "new/c.txt", "deleted file mode 100644"} {
		if !strings.Contains(string(patch), want) {
			t.Errorf("patch lacks %q:\n%s", want, patch)
		}
	}
	if strings.Contains(string(patch), "secret prompt") {
		t.Errorf("the patch holds the prompt:\n%s", patch)
	}
	if st, _ := os.Stat(res.Bundle); st == nil || res.Bytes < st.Size() {
		t.Errorf("bytes %d, bundle %v", res.Bytes, st)
	}
	fx.requireStateClean()

	push, err := PublishSalvage(context.Background(), PublishRequest{Bundle: res.Bundle, Commit: res.Worktree,
		BaseCommit: fx.baseID, Repo: fx.remote, Branch: "kew/fix", StateDir: fx.state, Environ: fx.env})
	if err != nil {
		t.Fatalf("PublishSalvage() error: %v", err)
	}
	if !push.Pushed || fx.remoteBranch() != res.Worktree {
		t.Fatalf("PublishSalvage() = %+v, remote kew/fix %s, want %s", push, fx.remoteBranch(), res.Worktree)
	}
	revs := strings.Fields(fx.git("", "--git-dir="+fx.remote, "rev-list", fx.baseID+"..kew/fix"))
	if len(revs) != 3 || revs[1] != second || revs[2] != first {
		t.Errorf("remote history %v, want the worktree commit, %s, %s", revs, second, first)
	}
	for _, id := range revs {
		files := fx.git("", "--git-dir="+fx.remote, "ls-tree", "-r", "--name-only", id)
		if strings.Contains(files, planner.PromptFilename) || strings.Contains(files, planner.VerdictFilename) {
			t.Errorf("commit %s holds a host-owned file:\n%s", id, files)
		}
	}
	if got := fx.git("", "--git-dir="+fx.remote, "show", "kew/fix:README.md"); got != "hello, edited\n" {
		t.Errorf("README.md on the branch = %q", got)
	}
	fx.requireStateClean()

	// The bundle is ordinary git: a user can fetch it by hand.
	fx.git(fx.checkout, "fetch", "--quiet", res.Bundle, "refs/kew/worktree:refs/heads/salvaged")
}

// TestSalvageHostileTree: a symbolic link to a host file, a FIFO and a 1 GiB sparse file in the uncommitted tree
// are none of them followed, opened or copied; the ordinary edit beside them is kept.
func TestSalvageHostileTree(t *testing.T) {
	fx := newBrokerFixture(t)
	secret := filepath.Join(fx.base, "host-secret")
	fx.writeFile(secret, "host secret\n")
	if err := os.Symlink(secret, filepath.Join(fx.checkout, "link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(fx.checkout, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	sparse, err := os.Create(filepath.Join(fx.checkout, "huge.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sparse.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	sparse.Close()
	fx.writeFile(filepath.Join(fx.checkout, "README.md"), "edited\n")

	res := fx.salvage(filepath.Join(fx.base, "salvage", "fix"))
	if !res.Kept || res.Commits != 0 || res.FilesChanged != 1 {
		t.Fatalf("Salvage() = %+v, want only README.md kept", res)
	}
	skipped := strings.Join(res.Skipped, "\n")
	for _, want := range []string{"link.txt: is a symbolic link", "pipe: is a named pipe", "huge.bin: 1073741824 bytes, over the"} {
		if !strings.Contains(skipped, want) {
			t.Errorf("skipped %q, want it to name %q", skipped, want)
		}
	}
	if res.Bytes > 1<<20 {
		t.Errorf("kept %d bytes: the sparse file was copied", res.Bytes)
	}
	fx.git(fx.checkout, "fetch", "--quiet", res.Bundle, "refs/kew/worktree:refs/heads/salvaged")
	files := fx.git(fx.checkout, "ls-tree", "-r", "--name-only", "salvaged")
	if files != "README.md\nmain.go\n" {
		t.Errorf("the worktree commit holds %q", files)
	}
	patch, _ := os.ReadFile(res.Patch)
	if strings.Contains(string(patch), "host secret") {
		t.Errorf("the link was followed:\n%s", patch)
	}
}

// TestSalvageNothingMade: an agent that committed nothing and changed nothing leaves nothing to keep.
func TestSalvageNothingMade(t *testing.T) {
	fx := newBrokerFixture(t)
	fx.writeFile(filepath.Join(fx.checkout, planner.PromptFilename), "prompt\n")
	dest := filepath.Join(fx.base, "salvage", "fix")
	if res := fx.salvage(dest); res.Kept || res.Worktree != "" || res.Commits != 0 {
		t.Errorf("Salvage() = %+v, want nothing kept", res)
	}
	if _, err := os.Lstat(dest); !os.IsNotExist(err) {
		t.Errorf("salvage directory written for nothing: %v", err)
	}
}
