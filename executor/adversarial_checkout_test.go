//go:build linux

package executor

// Section A of the checklist through a real apply: hostile repositories (A12-A14, A20), a hostile agent that
// tampers with the prompt and the checkout (A15-A17, A21), a late verdict writer (A10), and the prompt's removal
// on every exit path (A18). The unit tests of the prompt and the sidecar (checkout_test.go, verdict_test.go) try
// the same attacks against the functions; these show the whole apply keeps the promise.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/planner"
)

// hostileRepo makes a git repository whose single commit holds what plant put in the work tree (symlinks included:
// git stores them as links).
func hostileRepo(t *testing.T, plant func(dir string)) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "hostile-origin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("# hostile\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	plant(dir)
	for _, args := range [][]string{
		{"init", "--quiet", "--initial-branch=main"},
		{"add", "--all"},
		{"-c", "user.name=kewplan test", "-c", "user.email=test@kewplan.invalid", "commit", "--quiet", "-m", "hostile"},
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

// hostCanary is a directory outside every checkout holding a file the attacks aim at; unchanged reports whether
// the directory, the file's content, mode and owner are exactly as made.
type hostCanary struct {
	dir, file string
	content   []byte
}

func newHostCanary(t *testing.T) *hostCanary {
	t.Helper()
	c := &hostCanary{dir: filepath.Join(t.TempDir(), "canary-dir")}
	c.file = filepath.Join(c.dir, "canary.txt")
	c.content = []byte("canary " + randomSuffix() + "\n")
	if err := os.Mkdir(c.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.file, c.content, 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *hostCanary) unchanged() (bool, string) {
	di, err := os.Lstat(c.dir)
	if err != nil {
		return false, "canary directory: " + err.Error()
	}
	fi, err := os.Lstat(c.file)
	if err != nil {
		return false, "canary file: " + err.Error()
	}
	b, err := os.ReadFile(c.file)
	if err != nil {
		return false, "canary file: " + err.Error()
	}
	dst, fst := di.Sys().(*syscall.Stat_t), fi.Sys().(*syscall.Stat_t)
	ok := bytes.Equal(b, c.content) && di.Mode().Perm() == 0o700 && fi.Mode().Perm() == 0o600 &&
		dst.Uid == uint32(os.Geteuid()) && fst.Uid == uint32(os.Geteuid())
	return ok, fmt.Sprintf("canary dir %v uid %d, file %v uid %d, content kept %v", di.Mode().Perm(), dst.Uid, fi.Mode().Perm(), fst.Uid, bytes.Equal(b, c.content))
}

// TestAdvRepoShipsPromptName (A12-A14): a repository commits something at the prompt's name.
func TestAdvRepoShipsPromptName(t *testing.T) {
	canary := newHostCanary(t)
	for _, tc := range []struct {
		id, attack string
		plant      func(dir string)
	}{
		{"A12", "the repository ships .kew-prompt.txt -> a host file outside the checkout", func(dir string) {
			must(t, os.Symlink(canary.file, filepath.Join(dir, planner.PromptFilename)))
		}},
		{"A13", "the repository ships .kew-prompt.txt -> .git/config", func(dir string) {
			must(t, os.Symlink(".git/config", filepath.Join(dir, planner.PromptFilename)))
		}},
		{"A14", "the repository ships .kew-prompt.txt as a directory", func(dir string) {
			must(t, os.Mkdir(filepath.Join(dir, planner.PromptFilename), 0o755))
			must(t, os.WriteFile(filepath.Join(dir, planner.PromptFilename, "x"), []byte("x"), 0o644))
		}},
	} {
		t.Run(tc.id, func(t *testing.T) {
			c := adv(t, tc.id, tc.attack, "the node fails before its container starts; nothing is written through the name; the target is intact")
			f := advFixture(t)
			f.repo = hostileRepo(t, tc.plant)
			cfg := f.config(advNode("planted", "reviewer", "mode=succeed\nverdict=approve", ""))
			sum, _, err := f.apply(context.Background(), cfg, func(o *ApplyOptions) { o.KeepCheckouts = true })
			if err != nil {
				t.Fatal(err)
			}
			// The checkout is kept to look at .git/config, and it still holds what the repository shipped at the
			// prompt's name: check the containers, and that the name holds no prompt.
			left, err := f.eng.ListContainers(context.Background(), planner.LabelRun+"="+sum.RunID)
			c.check(err == nil && len(left) == 0, "no container of the run is left (%d)", len(left))
			fi, err := os.Lstat(filepath.Join(f.checkoutOf(sum.RunID, f.node("planted")), planner.PromptFilename))
			c.check(err == nil && !fi.Mode().IsRegular(), "the shipped name was left as shipped (%v), never replaced by a prompt", fi.Mode().Type())
			res := resultOf(t, sum, f.node("planted"))
			c.check(res.Status == ledger.StatusFailed && res.ExitCode == nil && strings.Contains(res.Reason, "already exists"),
				"node %s before any container ran: %s", res.Status, res.Reason)
			ok, state := canary.unchanged()
			c.check(ok, "%s", state)
			gitConfig, err := os.ReadFile(filepath.Join(f.checkoutOf(sum.RunID, f.node("planted")), ".git", "config"))
			c.check(err == nil && bytes.Contains(gitConfig, []byte("[core]")), "the checkout's .git/config is intact (%d bytes, %v)", len(gitConfig), err)
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestAdvAgentSwapsPrompt (A15): the agent replaces the prompt by a link during the run.
func TestAdvAgentSwapsPrompt(t *testing.T) {
	c := adv(t, "A15", "the agent replaces .kew-prompt.txt by a link to a host file, and by a link to .git/config",
		"the deletion unlinks the link only; the targets are intact; the prompt name is gone")
	canary := newHostCanary(t)
	f := advFixture(t)
	cfg := f.config(advNode("abs", "reviewer", "mode=swap-prompt\ntarget="+canary.file+"\nverdict=approve", "") +
		advNode("inroot", "reviewer", "mode=swap-prompt\ntarget=.git/config\nverdict=approve", ""))
	sum, _, err := f.apply(context.Background(), cfg, func(o *ApplyOptions) { o.KeepCheckouts = true })
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	for _, n := range []string{"abs", "inroot"} {
		res := resultOf(t, sum, f.node(n))
		_, lerr := os.Lstat(filepath.Join(f.checkoutOf(sum.RunID, f.node(n)), planner.PromptFilename))
		c.check(errors.Is(lerr, fs.ErrNotExist), "%s: node %s; the prompt name is gone (%v)", n, res.Status, lerr)
	}
	ok, state := canary.unchanged()
	c.check(ok, "%s", state)
	gitConfig, err := os.ReadFile(filepath.Join(f.checkoutOf(sum.RunID, f.node("inroot")), ".git", "config"))
	c.check(err == nil && bytes.Contains(gitConfig, []byte("[core]")), "the checkout's .git/config is intact (%d bytes)", len(gitConfig))
}

// TestAdvAgentPromptDir (A16): the agent turns the prompt into a non-empty directory.
func TestAdvAgentPromptDir(t *testing.T) {
	c := adv(t, "A16", "the agent replaces .kew-prompt.txt by a non-empty directory",
		"removed inside the checkout only, reported loudly (SECURITY warning), the node fails")
	f := advFixture(t)
	cfg := f.config(advNode("dir", "reviewer", "mode=prompt-dir\nverdict=approve", ""))
	sum, rec, err := f.apply(context.Background(), cfg, func(o *ApplyOptions) { o.KeepCheckouts = true })
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	res := resultOf(t, sum, f.node("dir"))
	c.check(res.Status == ledger.StatusFailed && strings.Contains(res.Reason, "replaced by a directory"), "node %s: %s", res.Status, res.Reason)
	c.check(strings.Contains(rec.warningText(), "SECURITY"), "warning: %s", strings.TrimSpace(rec.warningText()))
	_, lerr := os.Lstat(filepath.Join(f.checkoutOf(sum.RunID, f.node("dir")), planner.PromptFilename))
	c.check(errors.Is(lerr, fs.ErrNotExist), "the directory is gone (%v)", lerr)
}

// TestAdvCheckoutLockout (A17): the agent, which owns the checkout, makes it unreadable and unwritable.
func TestAdvCheckoutLockout(t *testing.T) {
	c := adv(t, "A17", "the agent chmods every directory of the checkout 000 and its root a-w",
		"the checkout is still removed, or the failure is reported (never ignored); the prompt is removed")
	f := advFixture(t)
	cfg := f.config(advNode("lock", "reviewer", "mode=lockout", ""))
	sum, rec, err := f.apply(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	res := resultOf(t, sum, f.node("lock"))
	checkout := f.checkoutOf(sum.RunID, f.node("lock"))
	_, statErr := os.Lstat(checkout)
	removed := errors.Is(statErr, fs.ErrNotExist)
	reported := strings.Contains(rec.warningText(), "could not remove the checkout")
	c.check(removed || reported, "kewplan runs as uid %d; checkout removed %v, failure reported %v; node %s: %s",
		os.Geteuid(), removed, reported, res.Status, res.Reason)
	if !removed {
		_ = filepath.WalkDir(checkout, func(p string, d fs.DirEntry, err error) error { os.Chmod(p, 0o755); return nil })
	}
}

// TestAdvRepoHostileLinks (A20): links to host paths shipped by the repository and planted by the agent.
func TestAdvRepoHostileLinks(t *testing.T) {
	c := adv(t, "A20", "the repository ships links to a host directory and out of the checkout; the agent plants more",
		"no host-side step (chown/chmod walk, verdict search, removal) follows them; the host directory is intact")
	canary := newHostCanary(t)
	f := advFixture(t)
	f.repo = hostileRepo(t, func(dir string) {
		must(t, os.MkdirAll(filepath.Join(dir, "src", "nested"), 0o755))
		for _, p := range []string{"host-dir", "src/host-dir", "src/nested/host-file"} {
			target := canary.dir
			if strings.HasSuffix(p, "file") {
				target = canary.file
			}
			must(t, os.Symlink(target, filepath.Join(dir, p)))
		}
		must(t, os.Symlink("../../../../../../../../../..", filepath.Join(dir, "src", "up")))
	})
	cfg := f.config(advNode("links", "reviewer", "mode=links\ntarget="+canary.dir, "") +
		advNode("worker", "", "mode=links\ntarget="+canary.dir, "  branch = \"kew/links\"\n"))
	sum, _, err := f.apply(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	reviewer, worker := resultOf(t, sum, f.node("links")), resultOf(t, sum, f.node("worker"))
	c.check(reviewer.Status == ledger.StatusHeld, "reviewer without a sidecar at the root: %s: %s", reviewer.Status, reviewer.Reason)
	c.observe("worker: %s %s", worker.Status, worker.Reason)
	ok, state := canary.unchanged()
	c.check(ok, "%s", state)
}

// TestAdvHugeTree (A21): a chain of directories far past PATH_MAX with 255-byte names, and a wide directory.
func TestAdvHugeTree(t *testing.T) {
	c := adv(t, "A21", "the agent builds 4096 nested 255-byte-named directories (1 MiB paths) and a directory of 20000 entries, "+
		"with a sidecar at the bottom",
		"every host walker is bounded (the sidecar search stops, finds nothing), nothing overflows, the checkout is removed")
	f := advFixture(t)
	cfg := f.config(advNode("tree", "reviewer", "mode=deeptree\ndepth=4096\nfiles=20000", "  timeout = \"5m\"\n"))
	sum, rec, err := f.apply(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	res := resultOf(t, sum, f.node("tree"))
	r := agentReport(t, res)
	c.check(reportString(r, "depth") == "4096" && reportString(r, "files") == "20000", "built depth %s, %s files", reportString(r, "depth"), reportString(r, "files"))
	c.check(res.Status == ledger.StatusHeld && strings.Contains(res.Reason, "wrote no"), "node %s: %s", res.Status, res.Reason)
	_, statErr := os.Lstat(f.checkoutOf(sum.RunID, f.node("tree")))
	c.check(errors.Is(statErr, fs.ErrNotExist) && !strings.Contains(rec.warningText(), "could not remove"), "checkout removed (%v) %s", statErr, strings.TrimSpace(rec.warningText()))
	c.observe("1e6 files was scaled to 20000: the search stops at its 10000-entry budget whatever the size")
}

// TestAdvVerdictLateWrite (A10): a child keeps rewriting the sidecar, alternating verdicts, until the container
// dies; the host must read once, after the container is gone, and parse exactly the bytes it digested.
func TestAdvVerdictLateWrite(t *testing.T) {
	c := adv(t, "A10", "a child process rewrites the verdict sidecar in a loop (approve/reject) until the container dies",
		"the host reads once, after the container is removed: the stored copy equals the final file, its digest is sha256 of the parsed bytes")
	f := advFixture(t)
	cfg := f.config(advNode("flip", "reviewer", "mode=flip", ""))
	sum, _, err := f.apply(context.Background(), cfg, func(o *ApplyOptions) { o.KeepCheckouts = true })
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	res := resultOf(t, sum, f.node("flip"))
	if res.Verdict == nil {
		t.Fatalf("no verdict: %s: %s", res.Status, res.Reason)
	}
	stored, err := os.ReadFile(res.Verdict.StoredPath)
	must(t, err)
	final, err := os.ReadFile(filepath.Join(f.checkoutOf(sum.RunID, f.node("flip")), planner.VerdictFilename))
	must(t, err)
	sumHex := sha256.Sum256(stored)
	c.check(bytes.Equal(stored, final), "stored copy equals the file left after the container was gone (%q)", stored)
	c.check(res.Verdict.SHA256 == hex.EncodeToString(sumHex[:]), "digest %s is sha256 of the stored bytes", res.Verdict.SHA256[:12])
	c.check(strings.Contains(string(stored), `"`+res.Verdict.Verdict+`"`), "verdict %s is the one in those bytes (node %s)", res.Verdict.Verdict, res.Status)
}

// TestAdvPromptEveryExitPath (A18): whatever way a node ends, no prompt file and no container remain. The paths
// apply_test.go already drives (agent failure, timeout, cancellation, engine error mid-run) are run by `make
// adversarial` too; this one adds the ones they do not: an unparseable verdict, a crash of the agent, and a panic
// in kewplan's own hook.
func TestAdvPromptEveryExitPath(t *testing.T) {
	c := adv(t, "A18", "a node ends by success, agent failure, unparseable verdict, timeout, and a panic in kewplan's hook",
		"no .kew-prompt.txt and no container remain after any of them")
	f := advFixture(t)
	cfg := f.config(advNode("ok", "reviewer", "mode=succeed\nverdict=approve", "") +
		advNode("exit1", "reviewer", "mode=escapes", "") +
		advNode("badverdict", "reviewer", "mode=succeed\nverdict=APPROVE", "") +
		advNode("timeout", "reviewer", "mode=wait", "  timeout = \"3s\"\n"))
	sum, _, err := f.apply(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	for _, want := range [][2]string{{"ok", ledger.StatusApproved}, {"exit1", ledger.StatusFailed}, {"badverdict", ledger.StatusHeld}, {"timeout", ledger.StatusTimedOut}} {
		res := resultOf(t, sum, f.node(want[0]))
		c.check(res.Status == want[1], "%s: %s", want[0], res.Status)
	}

	// A panic in the hook (kewplan's own code, on the goroutine that meters the agent's output) while the
	// container runs: apply must still clean up before the panic goes on.
	f2 := advFixture(t)
	cfg2 := f2.config(advNode("panic", "reviewer", "mode=wait", "  timeout = \"2m\"\n"))
	var once sync.Once
	var runID string
	recovered := func() (r any) {
		defer func() { r = recover() }()
		_, _, _ = f2.apply(context.Background(), cfg2, func(o *ApplyOptions) {
			o.Hooks[0].(*recorder).onProg = func(e NodeProgressEvent) {
				if e.Totals.SessionID != "" {
					once.Do(func() { runID = e.RunID })
					panic("adversarial: a bug in a hook")
				}
			}
		})
		return nil
	}()
	hp, ok := recovered.(*hookPanic)
	c.check(ok && hp.Value == "adversarial: a bug in a hook", "the hook's panic reached the caller after cleanup (%T)", recovered)
	if runID != "" {
		f2.assertClean(runID)
		run, _ := f2.ledgerRun(runID)
		c.check(run.Status == ledger.RunCancelled || run.Status == ledger.RunFailed, "the run is recorded %s", run.Status)
	}
}
