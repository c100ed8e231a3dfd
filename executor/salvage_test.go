package executor

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/statedir"
	"github.com/kewplan/kewplan/planner"
)

// Salvage against the real engine: what a stopped worker made is kept before its checkout is removed, and is
// published only by PublishSalvage, through the broker.

// bareRemote makes the fixture's repository a bare clone of it, so that pushes land in a repository nobody has
// checked out.
func (f *fixture) bareRemote() string {
	f.t.Helper()
	bare := filepath.Join(f.dir, "remote.git")
	if out, err := exec.Command("git", "clone", "--quiet", "--bare", f.repo, bare).CombinedOutput(); err != nil {
		f.t.Fatalf("git clone --bare: %v\n%s", err, out)
	}
	f.repo = bare
	return bare
}

func gitOut(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@kewplan.invalid", "GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@kewplan.invalid")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestSalvageBudgetKilledWorker is the test: a worker that commits twice and edits a file is killed at its
// budget; its work is kept (2 commits, 1 file changed), recorded with the reason, nothing is pushed, and
// PublishSalvage then pushes both commits and a commit of the edit to kew/salvage/<slug>-<run> of a bare
// repository, with the prompt file in none of them.
func TestSalvageBudgetKilledWorker(t *testing.T) {
	f := newFixture(t)
	remote := f.bareRemote()
	cfg := f.config(`
node "%[1]sfix" {
  runner  = "claude-code"
  model   = "claude-sonnet-4-5"
  repo    = %[2]q
  prompt  = "mode=turns\ncommits=2\nedit=README.md:edited by the agent\nturns=2\nusage=100000,20000\nsleep=1h"
  timeout = "5m"
  budget {
    max_usd = 1.0
  }
}
`)
	sum, rec, err := f.apply(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	fix := resultOf(t, sum, f.node("fix"))
	if fix.Status != ledger.StatusBudgetExceeded || fix.Pushed {
		t.Fatalf("fix: %s pushed=%v (%s), want budget_exceeded and nothing pushed", fix.Status, fix.Pushed, fix.Reason)
	}
	s := fix.Salvage
	if s == nil || s.Commits != 2 || s.FilesChanged != 1 || s.Worktree == "" || s.Why != "the budget of $1.00 was reached" {
		t.Fatalf("fix: salvage %+v, want 2 commits and 1 file changed kept because the budget of $1.00 was reached", s)
	}
	if !strings.Contains(rec.warningText(), "kewplan salvage "+sum.RunID+" "+f.node("fix")) {
		t.Errorf("no warning says how to publish it:\n%s", rec.warningText())
	}
	dir := statedir.Dir{Root: f.stateDir}
	if _, err := os.Stat(dir.Checkout(sum.RunID, f.node("fix"), fix.Node, 1)); !os.IsNotExist(err) {
		t.Errorf("the checkout is still there: %v", err)
	}
	if out := gitOut(t, "--git-dir="+remote, "branch", "--list"); strings.Contains(out, "kew/") {
		t.Fatalf("something was pushed before kewplan salvage: %s", out)
	}
	_, rows := f.ledgerRun(sum.RunID)
	if row := rows[f.node("fix")].Salvage; row == nil || row.Worktree != s.Worktree || row.Summary() != s.Summary() {
		t.Fatalf("ledger salvage %+v, want %+v", row, s)
	}

	out, err := PublishSalvage(context.Background(), SalvageOptions{StateDir: f.stateDir, RunID: sum.RunID, Node: f.node("fix")})
	if err != nil {
		t.Fatal(err)
	}
	wantBranch := "kew/salvage/" + filepath.Base(s.Dir) + "-" + sum.RunID
	if out.Branch != wantBranch || out.Commit != s.Worktree {
		t.Fatalf("PublishSalvage() = %+v, want %s at %s", out, wantBranch, s.Worktree)
	}
	revs := strings.Fields(gitOut(t, "--git-dir="+remote, "rev-list", s.BaseCommit+".."+wantBranch))
	if len(revs) != 3 || revs[0] != s.Worktree || revs[1] != s.Head {
		t.Fatalf("the salvage branch holds %v, want the edit's commit on top of the agent's two (head %s)", revs, s.Head)
	}
	for _, id := range revs {
		if files := gitOut(t, "--git-dir="+remote, "ls-tree", "-r", "--name-only", id); strings.Contains(files, planner.PromptFilename) {
			t.Errorf("commit %s holds the prompt file:\n%s", id, files)
		}
	}
	if got := gitOut(t, "--git-dir="+remote, "show", wantBranch+":README.md"); got != "edited by the agent\n" {
		t.Errorf("README.md on the salvage branch = %q", got)
	}
	if got := gitOut(t, "--git-dir="+remote, "show", wantBranch+":work-2.txt"); got != "work 2\n" {
		t.Errorf("work-2.txt on the salvage branch = %q", got)
	}
	_, rows = f.ledgerRun(sum.RunID)
	if row := rows[f.node("fix")].Salvage; row == nil || row.PublishedBranch != wantBranch {
		t.Errorf("the ledger does not record the publication: %+v", row)
	}
	// No force: a branch that holds a commit the kept work does not contain is refused.
	other := strings.TrimSpace(gitOut(t, "--git-dir="+remote, "commit-tree", s.BaseCommit+"^{tree}", "-p", s.BaseCommit, "-m", "someone else"))
	gitOut(t, "--git-dir="+remote, "update-ref", "refs/heads/taken", other)
	if _, err := PublishSalvage(context.Background(), SalvageOptions{StateDir: f.stateDir, RunID: sum.RunID, Node: f.node("fix"),
		Branch: "taken"}); err == nil || !strings.Contains(err.Error(), "already has commits") {
		t.Errorf("publishing over another commit: %v, want a refusal (no force push)", err)
	}
	if got := strings.TrimSpace(gitOut(t, "--git-dir="+remote, "rev-parse", "refs/heads/taken")); got != other {
		t.Errorf("branch taken moved to %s", got)
	}
	// Every check of a push applies: kept work never lands on a protected branch.
	mainBefore := gitOut(t, "--git-dir="+remote, "rev-parse", "refs/heads/main")
	if _, err := PublishSalvage(context.Background(), SalvageOptions{StateDir: f.stateDir, RunID: sum.RunID, Node: f.node("fix"),
		Branch: "main"}); err == nil || !strings.Contains(err.Error(), planner.RulePushProtectedBranch) {
		t.Errorf("publishing to main: %v, want a %s refusal", err, planner.RulePushProtectedBranch)
	}
	if got := gitOut(t, "--git-dir="+remote, "rev-parse", "refs/heads/main"); got != mainBefore {
		t.Errorf("main moved to %s", got)
	}
}

// TestPushToTheRemoteDefaultBranchRefused: a worker whose branch no pattern of the plan protects, but which the
// remote names as its default branch (only the remote knows that), plans cleanly and is refused at push with
// push-protected-branch; its commit is kept, and the remote's branch does not move.
func TestPushToTheRemoteDefaultBranchRefused(t *testing.T) {
	f := newFixture(t)
	remote := f.bareRemote()
	gitOut(t, "--git-dir="+remote, "branch", "production", "main")
	gitOut(t, "--git-dir="+remote, "symbolic-ref", "HEAD", "refs/heads/production")
	before := gitOut(t, "--git-dir="+remote, "rev-parse", "refs/heads/production")
	cfg := f.config(`
node "%[1]sfix" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  branch = "production"
  prompt = "mode=turns\ncommits=1\nturns=1"
}
`)
	sum, _, err := f.apply(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	fix := resultOf(t, sum, f.node("fix"))
	if fix.Status != ledger.StatusFailed || fix.Pushed || !strings.Contains(fix.Reason, planner.RulePushProtectedBranch) ||
		!strings.Contains(fix.Reason, "default branch") {
		t.Fatalf("fix: %s pushed=%v (%s), want failed with %s naming the default branch", fix.Status, fix.Pushed, fix.Reason, planner.RulePushProtectedBranch)
	}
	if got := gitOut(t, "--git-dir="+remote, "rev-parse", "refs/heads/production"); got != before {
		t.Errorf("production moved to %s", got)
	}
	if s := fix.Salvage; s == nil || s.Commits != 1 || s.Why != "its push was refused" {
		t.Errorf("fix: salvage %+v, want its commit kept because its push was refused", s)
	}
}

// TestSalvageHostileWorktree: a failed worker whose uncommitted tree holds a symbolic link to a host file, a FIFO
// and a 1 GiB sparse file: none is followed, opened or copied; its one ordinary edit is kept.
func TestSalvageHostileWorktree(t *testing.T) {
	f := newFixture(t)
	secret := filepath.Join(f.dir, "host-secret.txt")
	if err := os.WriteFile(secret, []byte("HOST SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := f.config(`
node "%[1]sfix" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  prompt = "mode=fail\nedit=notes.txt:kept\nlink=secret.txt:` + secret + `\nfifo=pipe\nsparse=huge.bin:1073741824"
}
`)
	sum, _, err := f.apply(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	fix := resultOf(t, sum, f.node("fix"))
	s := fix.Salvage
	if fix.Status != ledger.StatusFailed || s == nil || s.Commits != 0 || s.FilesChanged != 1 || s.Why != "the agent failed" {
		t.Fatalf("fix: %s, salvage %+v; want failed with notes.txt kept", fix.Status, s)
	}
	skipped := strings.Join(s.Skipped, "\n")
	for _, want := range []string{"secret.txt: is a symbolic link", "pipe: is a named pipe", "huge.bin: 1073741824 bytes, over the"} {
		if !strings.Contains(skipped, want) {
			t.Errorf("skipped %q, want it to name %q", skipped, want)
		}
	}
	if s.Bytes > 1<<20 {
		t.Errorf("%d bytes kept: the sparse file was copied", s.Bytes)
	}
	patch, err := os.ReadFile(filepath.Join(s.Dir, "uncommitted.patch"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(patch), "HOST SECRET") || !strings.Contains(string(patch), "+kept") {
		t.Errorf("patch:\n%s", patch)
	}
}

// TestRunsPruneKeepsTheNewest: three runs that each keep work; prune --keep 1 removes the two older runs' logs and
// salvage and marks them, and leaves the newest intact; --before a date before them all removes nothing.
func TestRunsPruneKeepsTheNewest(t *testing.T) {
	f := newFixture(t)
	cfg := f.config(`
node "%[1]sfix" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  prompt = "mode=fail\nedit=notes.txt:kept"
}
`)
	var runs []string
	for i := 0; i < 3; i++ {
		sum, _, err := f.apply(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if resultOf(t, sum, f.node("fix")).Salvage == nil {
			t.Fatalf("run %d kept nothing", i)
		}
		runs = append(runs, sum.RunID)
	}
	dir := statedir.Dir{Root: f.stateDir}
	if out, err := Prune(PruneOptions{StateDir: f.stateDir, Before: time.Unix(1, 0)}); err != nil || len(out.Pruned) != 0 || out.Kept != 3 {
		t.Fatalf("Prune(--before 1970) = %+v, %v; want nothing pruned", out, err)
	}
	out, err := Prune(PruneOptions{StateDir: f.stateDir, Keep: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Pruned) != 2 || out.Kept != 1 || out.Bytes == 0 {
		t.Fatalf("Prune(--keep 1) = %+v, want the two older runs pruned", out)
	}
	for i, id := range runs {
		_, logsErr := os.Stat(dir.RunLogs(id))
		_, salvageErr := os.Stat(dir.RunSalvage(id))
		_, rows := f.ledgerRun(id)
		s := rows[f.node("fix")].Salvage
		newest := i == len(runs)-1
		if newest != (logsErr == nil) || newest != (salvageErr == nil) || s == nil || s.Pruned == newest {
			t.Errorf("run %d (%s): logs %v, salvage %v, ledger salvage %+v; want newest=%v intact", i, id, logsErr, salvageErr, s, newest)
		}
	}
	if _, err := PublishSalvage(context.Background(), SalvageOptions{StateDir: f.stateDir, RunID: runs[0], Node: f.node("fix")}); err == nil ||
		!strings.Contains(err.Error(), "runs prune") {
		t.Errorf("publishing pruned work: %v, want a refusal naming runs prune", err)
	}
}

// TestResumeFromSalvage: a worker with resume_from_salvage = true that failed after committing twice and editing a
// file is resumed: the resume plan says it starts from the kept work, its new checkout holds that work (the
// edit as the host's commit), and its push carries the kept commits. (The second agent makes no commit of its own:
// the stand-in reads loose objects only, and the kept work arrives packed.)
func TestResumeFromSalvage(t *testing.T) {
	f := newFixture(t)
	remote := f.bareRemote()
	const node = `
node "%%[1]sfix" {
  runner              = "claude-code"
  model               = "claude-sonnet-4-5"
  repo                = %%[2]q
  prompt              = %q
  resume_from_salvage = true
}
`
	cfg := f.config(fmt.Sprintf(node, "mode=fail\ncommits=2\nedit=README.md:edited by the agent"))
	sum1, _, err := f.apply(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	fix1 := resultOf(t, sum1, f.node("fix"))
	if fix1.Status != ledger.StatusFailed || fix1.Salvage == nil || fix1.Salvage.Commits != 2 || fix1.Salvage.Worktree == "" {
		t.Fatalf("first run: %s, salvage %+v", fix1.Status, fix1.Salvage)
	}

	again := f.config(fmt.Sprintf(node, "mode=succeed"))
	p := f.plan(again)
	prev, err := LoadPreviousRun(context.Background(), statedir.Dir{Root: f.stateDir}, sum1.RunID, p, again.Dir)
	if err != nil {
		t.Fatal(err)
	}
	rp := planner.Resume(p, prev, nil)
	d := rp.Decision(f.node("fix"))
	if d == nil || d.Action != planner.ResumeRun || d.FromSalvage == nil || d.FromSalvage.Commit != fix1.Salvage.Worktree ||
		!strings.Contains(d.Reason, "starts from the work kept in "+sum1.RunID) {
		t.Fatalf("resume decision %+v, want a run from the kept work", d)
	}
	sum2, rec, err := f.apply(context.Background(), again, func(o *ApplyOptions) { o.Plan, o.Resume = p, rp })
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum2.RunID)
	fix2 := resultOf(t, sum2, f.node("fix"))
	if fix2.Status != ledger.StatusSucceeded || !fix2.Pushed {
		t.Fatalf("resumed run: %s pushed=%v (%s)", fix2.Status, fix2.Pushed, fix2.Reason)
	}
	if !strings.Contains(rec.warningText(), "starts from the work kept in run "+sum1.RunID) {
		t.Errorf("no event says where the node started from:\n%s", rec.warningText())
	}
	revs := strings.Fields(gitOut(t, "--git-dir="+remote, "rev-list", fix1.Salvage.BaseCommit+".."+fix2.Branch))
	if len(revs) != 3 || revs[0] != fix1.Salvage.Worktree || revs[1] != fix1.Salvage.Head || fix2.Commit != fix1.Salvage.Worktree {
		t.Fatalf("pushed history %v (commit %s), want the kept edit's commit on the kept head %s", revs, fix2.Commit, fix1.Salvage.Head)
	}
	for file, want := range map[string]string{"README.md": "edited by the agent\n", "work-1.txt": "work 1\n", "work-2.txt": "work 2\n"} {
		if got := gitOut(t, "--git-dir="+remote, "show", fix2.Branch+":"+file); strings.TrimSpace(got) != strings.TrimSpace(want) {
			t.Errorf("%s on %s = %q, want %q", file, fix2.Branch, got, want)
		}
	}
}

// TestSalvageHonoursPushProtections: kept work is published under every protection the node's own push had, as
// recorded with it: the sandbox's protected_branches and the branch the node was cloned from are refused with
// push-protected-branch and do not move, a branch of its own is pushed, and a node that says
// allow_protected_push publishes onto a protected branch as its push would have.
func TestSalvageHonoursPushProtections(t *testing.T) {
	f := newFixture(t)
	remote := f.bareRemote()
	gitOut(t, "--git-dir="+remote, "branch", "staging", "main")
	gitOut(t, "--git-dir="+remote, "branch", "feature-base", "main")
	f.sandboxExtra = "  protected_branches = [\"staging\"]\n"
	cfg := f.config(`
node "%[1]sfix" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  ref    = "feature-base"
  prompt = "mode=fail\nedit=notes.txt:kept"
}

node "%[1]sland" {
  runner               = "claude-code"
  model                = "claude-sonnet-4-5"
  repo                 = %[2]q
  prompt               = "mode=fail\nedit=landed.txt:kept"
  allow_protected_push = true
}
`)
	sum, _, err := f.apply(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	_, rows := f.ledgerRun(sum.RunID)
	if s := rows[f.node("fix")].Salvage; s == nil || !s.ProtectionsRecorded || s.AllowProtectedPush ||
		!slices.Contains(s.ProtectedBranches, "staging") || !slices.Contains(s.ProtectedBranches, "feature-base") {
		t.Fatalf("ledger salvage of fix %+v, want its protections (staging, feature-base) recorded", s)
	}
	if s := rows[f.node("land")].Salvage; s == nil || !s.AllowProtectedPush {
		t.Fatalf("ledger salvage of land %+v, want allow_protected_push recorded", s)
	}
	before := map[string]string{}
	for _, b := range []string{"staging", "feature-base", "main"} {
		before[b] = gitOut(t, "--git-dir="+remote, "rev-parse", "refs/heads/"+b)
	}
	for _, branch := range []string{"staging", "feature-base", "main"} {
		_, err := PublishSalvage(context.Background(), SalvageOptions{StateDir: f.stateDir, RunID: sum.RunID, Node: f.node("fix"), Branch: branch})
		if err == nil || !strings.Contains(err.Error(), planner.RulePushProtectedBranch) || !strings.Contains(err.Error(), "omit --branch") {
			t.Errorf("salvage --branch %s: %v, want a %s refusal saying to omit --branch", branch, err, planner.RulePushProtectedBranch)
		}
		if got := gitOut(t, "--git-dir="+remote, "rev-parse", "refs/heads/"+branch); got != before[branch] {
			t.Errorf("%s moved to %s", branch, got)
		}
	}
	if out, err := PublishSalvage(context.Background(), SalvageOptions{StateDir: f.stateDir, RunID: sum.RunID, Node: f.node("fix"),
		Branch: "kew/rescued"}); err != nil || out.Branch != "kew/rescued" {
		t.Errorf("salvage --branch kew/rescued = %+v, %v; want it pushed", out, err)
	}
	if _, err := PublishSalvage(context.Background(), SalvageOptions{StateDir: f.stateDir, RunID: sum.RunID, Node: f.node("land"),
		Branch: "staging"}); err != nil {
		t.Errorf("salvage of the node with allow_protected_push onto staging: %v, want it pushed", err)
	}
	if got := gitOut(t, "--git-dir="+remote, "show", "staging:landed.txt"); got != "kept\n" {
		t.Errorf("landed.txt on staging = %q", got)
	}
}

// TestHostGitConfigNeverRunsOnAgentCommits: the host's global git configuration defines a filter driver (and
// attributes that select it for every path) whose commands write a marker; an apply whose reviewer checks out
// the worker's commit, and whose broker pushes it, never runs it.
func TestHostGitConfigNeverRunsOnAgentCommits(t *testing.T) {
	f := newFixture(t)
	f.bareRemote()
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
	cfg := f.config(`
node "%[1]sfix" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  prompt = "mode=turns\ncommits=1\nturns=1"
}

node "%[1]sreview" {
  runner = "claude-code"
  role   = "reviewer"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  ref    = node.%[1]sfix.commit
  prompt = "mode=verdict\nverdict=approve"
}
`)
	sum, _, err := f.apply(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.assertClean(sum.RunID)
	if fix := resultOf(t, sum, f.node("fix")); !fix.Pushed {
		t.Fatalf("fix: %s (%s), want its commit pushed", fix.Status, fix.Reason)
	}
	if review := resultOf(t, sum, f.node("review")); review.Status != ledger.StatusApproved {
		t.Fatalf("review: %s (%s), want approved", review.Status, review.Reason)
	}
	if b, err := os.ReadFile(marker); err == nil {
		t.Errorf("the host's filter driver ran during apply: %q", b)
	}
}
