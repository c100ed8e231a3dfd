package checkout

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/kewplan/kewplan/internal/testtools/testkit"
	"github.com/kewplan/kewplan/planner"
)

// newCheckout makes a directory that looks like a fresh clone (it has .git/).
func newCheckout(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "checkout")
	if err := os.MkdirAll(filepath.Join(dir, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestWritePromptCreatesExcludesAndRemoves(t *testing.T) {
	dir := newCheckout(t)
	p, err := WritePrompt(dir, []byte("do the thing"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	b, err := os.ReadFile(filepath.Join(dir, planner.PromptFilename))
	if err != nil || string(b) != "do the thing" {
		t.Fatalf("prompt file: %q, %v", b, err)
	}
	ex, _ := os.ReadFile(filepath.Join(dir, ".git/info/exclude"))
	if !strings.Contains(string(ex), "/"+planner.PromptFilename) {
		t.Errorf(".git/info/exclude does not list the prompt:\n%s", ex)
	}
	if err := p.Remove(); err != nil {
		t.Fatal(err)
	}
	if err := p.Remove(); err != nil {
		t.Fatalf("a second Remove is not idempotent: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, planner.PromptFilename)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("prompt file still there: %v", err)
	}
}

// A name already taken by anything (a planted link out of the checkout, an in-checkout link, a directory, a
// FIFO) is refused, and nothing is written through it (security notes A12-A14).
func TestWritePromptRefusesPlantedNames(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, dir, canary string)
	}{
		{"link out of the checkout", func(t *testing.T, dir, canary string) {
			noErr(t, os.Symlink(canary, filepath.Join(dir, planner.PromptFilename)))
		}},
		{"link to .git/config", func(t *testing.T, dir, canary string) {
			noErr(t, os.WriteFile(filepath.Join(dir, ".git/config"), []byte("[core]\n"), 0o644))
			noErr(t, os.Symlink(".git/config", filepath.Join(dir, planner.PromptFilename)))
		}},
		{"dangling link", func(t *testing.T, dir, canary string) {
			noErr(t, os.Symlink(filepath.Join(filepath.Dir(canary), "created-through-link"), filepath.Join(dir, planner.PromptFilename)))
		}},
		{"directory", func(t *testing.T, dir, canary string) {
			noErr(t, os.Mkdir(filepath.Join(dir, planner.PromptFilename), 0o755))
		}},
		{"fifo", func(t *testing.T, dir, canary string) {
			noErr(t, syscall.Mkfifo(filepath.Join(dir, planner.PromptFilename), 0o644))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := newCheckout(t)
			canary := filepath.Join(t.TempDir(), "canary")
			noErr(t, os.WriteFile(canary, []byte("canary"), 0o644))
			tc.plant(t, dir, canary)
			p, err := WritePrompt(dir, []byte("secret prompt"))
			if err == nil {
				p.Close()
				t.Fatal("WritePrompt accepted a planted name")
			}
			if !errors.Is(err, ErrPromptExists) {
				t.Errorf("error %v does not wrap ErrPromptExists", err)
			}
			if b, _ := os.ReadFile(canary); string(b) != "canary" {
				t.Errorf("the canary was changed: %q", b)
			}
			if b, err := os.ReadFile(filepath.Join(dir, ".git/config")); err == nil && string(b) != "[core]\n" {
				t.Errorf(".git/config was truncated or written: %q", b)
			}
			if _, err := os.Lstat(filepath.Join(filepath.Dir(canary), "created-through-link")); err == nil {
				t.Error("a file was created through a dangling link")
			}
		})
	}
}

// The agent swaps the prompt for a link during the run: removal unlinks the link, never its target (A15); turns it
// into a non-empty directory: removal reports it loudly and removes it inside the checkout only (A16).
func TestRemovePromptAfterAgentTampering(t *testing.T) {
	t.Run("swapped for a link", func(t *testing.T) {
		dir := newCheckout(t)
		canary := filepath.Join(t.TempDir(), "canary")
		noErr(t, os.WriteFile(canary, []byte("canary"), 0o644))
		p, err := WritePrompt(dir, []byte("x"))
		noErr(t, err)
		defer p.Close()
		noErr(t, os.Remove(filepath.Join(dir, planner.PromptFilename)))
		noErr(t, os.Symlink(canary, filepath.Join(dir, planner.PromptFilename)))
		noErr(t, p.Remove())
		if b, _ := os.ReadFile(canary); string(b) != "canary" {
			t.Errorf("canary changed: %q", b)
		}
		if _, err := os.Lstat(filepath.Join(dir, planner.PromptFilename)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the link is still there: %v", err)
		}
	})
	t.Run("turned into a non-empty directory", func(t *testing.T) {
		dir := newCheckout(t)
		outside := t.TempDir()
		noErr(t, os.WriteFile(filepath.Join(outside, "keep"), []byte("keep"), 0o644))
		p, err := WritePrompt(dir, []byte("x"))
		noErr(t, err)
		defer p.Close()
		name := filepath.Join(dir, planner.PromptFilename)
		noErr(t, os.Remove(name))
		noErr(t, os.Mkdir(name, 0o755))
		noErr(t, os.WriteFile(filepath.Join(name, "x"), []byte("x"), 0o644))
		noErr(t, os.Symlink(outside, filepath.Join(name, "escape")))
		err = p.Remove()
		if err == nil || !strings.Contains(err.Error(), "replaced by a directory") {
			t.Errorf("Remove() = %v, want a loud report", err)
		}
		if _, err := os.Lstat(name); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the directory is still there: %v", err)
		}
		if _, err := os.Stat(filepath.Join(outside, "keep")); err != nil {
			t.Errorf("removal followed a link out of the checkout: %v", err)
		}
	})
}

func TestRemoveStalePrompt(t *testing.T) {
	dir := newCheckout(t)
	noErr(t, os.WriteFile(filepath.Join(dir, planner.PromptFilename), []byte("old"), 0o644))
	found, err := RemoveStalePrompt(dir)
	if err != nil || !found {
		t.Fatalf("RemoveStalePrompt() = %v, %v", found, err)
	}
	found, err = RemoveStalePrompt(filepath.Join(dir, "missing"))
	if err != nil || found {
		t.Fatalf("RemoveStalePrompt(missing) = %v, %v", found, err)
	}
}

func TestCloneCheckoutRefs(t *testing.T) {
	repo := testkit.GitRepo(t)
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t.invalid"}, args...)...)
		cmd.Dir = repo
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	first := git("rev-parse", "HEAD")
	git("checkout", "-q", "-b", "feature")
	noErr(t, os.WriteFile(filepath.Join(repo, "f.txt"), []byte("f"), 0o644))
	git("add", "f.txt")
	git("commit", "-qm", "feature")
	feature := git("rev-parse", "HEAD")
	git("tag", "v1", first)
	git("checkout", "-q", "main")
	ctx := context.Background()
	for _, tc := range []struct{ ref, want string }{{"", first}, {"main", first}, {"feature", feature}, {"v1", first}, {feature, feature}} {
		dir := filepath.Join(t.TempDir(), "co")
		got, err := Clone(ctx, repo, tc.ref, dir)
		if err != nil || got != tc.want {
			t.Errorf("Clone(ref %q) = %s, %v; want %s", tc.ref, got, err, tc.want)
		}
	}
	if _, err := Clone(ctx, repo, "no-such-ref", filepath.Join(t.TempDir(), "co")); err == nil || !strings.Contains(err.Error(), "neither a branch, a tag nor a commit") {
		t.Errorf("unknown ref: %v", err)
	}
	if _, err := Clone(ctx, repo, "--upload-pack=touch /tmp/x", filepath.Join(t.TempDir(), "co")); err == nil {
		t.Error("a ref starting with '-' was passed to git")
	}
	// Objects are copied, never hard-linked into the agent's checkout.
	dir := filepath.Join(t.TempDir(), "co")
	if _, err := Clone(ctx, repo, "main", dir); err != nil {
		t.Fatal(err)
	}
	_ = filepath.Walk(filepath.Join(dir, ".git/objects"), func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
				t.Errorf("%s is hard-linked (%d links)", p, st.Nlink)
			}
		}
		return nil
	})
}

func TestResolveRepo(t *testing.T) {
	for _, tc := range []struct{ repo, want string }{
		{"https://example.com/r.git", "https://example.com/r.git"},
		{"git@github.com:acme/r.git", "git@github.com:acme/r.git"},
		{"/abs/repo", "/abs/repo"},
		{"./work/origin", "/cfg/work/origin"},
		{"../up", "/up"},
		{"file:///x", "file:///x"},
	} {
		if got := ResolveRepo(tc.repo, "/cfg"); got != tc.want {
			t.Errorf("ResolveRepo(%q) = %q, want %q", tc.repo, got, tc.want)
		}
	}
}

func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// hostileGitConfig makes the host's global git configuration (GIT_CONFIG_GLOBAL) define a filter driver whose
// commands write a marker file, with host attributes that select it for every path, and returns the marker.
func hostileGitConfig(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	marker := filepath.Join(dir, "filter-ran")
	attrs := filepath.Join(dir, "attributes")
	if err := os.WriteFile(attrs, []byte("* filter=marker\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	global := filepath.Join(dir, "gitconfig")
	conf := fmt.Sprintf("[core]\n\tattributesFile = %s\n[filter \"marker\"]\n\tsmudge = \"echo smudge >> %s; cat\"\n\tclean = \"echo clean >> %s; cat\"\n\trequired = true\n",
		attrs, marker, marker)
	if err := os.WriteFile(global, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIT_CONFIG_GLOBAL", global)
	return marker
}

// TestCloneIgnoresHostGitConfig: a filter driver the host's global configuration defines (and its attributes
// select) never runs when kewplan clones and checks out a commit, which may be an agent's.
func TestCloneIgnoresHostGitConfig(t *testing.T) {
	repo := testkit.GitRepo(t)
	marker := hostileGitConfig(t)
	dir := filepath.Join(t.TempDir(), "checkout")
	if _, err := Clone(context.Background(), repo, "main", dir); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(marker); err == nil {
		t.Errorf("the host's filter driver ran during the clone: %q", b)
	}
}
