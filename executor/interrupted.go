package executor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/executor/adapter"
	"github.com/kewplan/kewplan/executor/broker"
	"github.com/kewplan/kewplan/executor/checkout"
	"github.com/kewplan/kewplan/executor/docker"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/statedir"
)

// Recognising interrupted runs and keeping what they paid for.
//
// An apply that dies (SIGKILL, the OOM killer, a reboot, a pre-empted CI runner) leaves its run `running` in the
// ledger, its agents' containers running and their checkouts on disk. The next command that takes the state
// directory's lock (apply, salvage, prune) or finds it free (runs, logs, --resume) recognises it: the kernel
// dropped the dead apply's flock, and its recorded process (host, boot, pid and start time) is gone. Then, in this
// order: the run and its open nodes are marked interrupted (ledger.MarkInterrupted), the orphaned containers are
// stopped (adapter.OrphanStopper) so that no agent writes any more, each interrupted worker's work is kept from its
// checkout exactly as a stopped worker's is (broker.Salvage: commits as a verified bundle, uncommitted files
// through the hostile-tree reader, the same bounds), and only then does the engine's sweep remove the containers,
// prompt files and checkouts.

// recoverInterrupted recognises the dead applies of the state directory whose lock the caller holds and keeps
// their work; eng is nil when no engine could be reached (the runs are marked, their checkouts stay for the next
// command). It reports through run.Warn and returns whether anything was recognised or kept.
func recoverInterrupted(ctx context.Context, l *ledger.Ledger, dir statedir.Dir, eng adapter.Engine, run *adapter.Run) {
	marked, live, err := l.MarkInterrupted(ledger.Process.Alive)
	if err != nil {
		run.Warn("", fmt.Sprintf("could not mark the runs of dead applies interrupted: %v", err))
	}
	if len(live) == 0 {
		removeStaleScratch(dir, run)
	}
	for _, r := range marked {
		run.Warn("", interruptedWarning(r))
	}
	for _, r := range live {
		run.Warn("", fmt.Sprintf("run %s is recorded running by kewplan pid %d on %s, which still runs but does not hold the lock of %s (was %s removed?); nothing of it is touched: stop that process or wait for it",
			r.ID, r.Process.PID, r.Process.Host, dir.Root, dir.Lock()))
	}
	if len(live) > 0 {
		return
	}
	// A run whose checkouts are still on disk has its work kept first; until then its nodes stay interrupted.
	workNotKept := func(id string) bool {
		_, err := os.Stat(dir.RunCheckouts(id))
		return err == nil
	}
	if eng == nil {
		resolvePushIntents(ctx, l, dir, run, workNotKept)
		return
	}
	var unstopped map[string]bool
	if s, ok := eng.(adapter.OrphanStopper); ok {
		var listed bool
		if unstopped, listed = s.StopOrphans(ctx, run); !listed {
			run.Warn("", "the checkouts of interrupted runs are left in place until a command can reach the engine and stop their containers")
			resolvePushIntents(ctx, l, dir, run, workNotKept)
			return
		}
	}
	keepInterruptedWork(ctx, l, dir, run, unstopped)
	resolvePushIntents(ctx, l, dir, run, func(id string) bool { return unstopped[id] })
	if len(unstopped) > 0 {
		run.Warn("", "the sweep of dead applies is left for the next command: some of their containers could not be stopped")
		return
	}
	eng.Sweep(ctx, run)
}

// removeStaleScratch removes what a dead kewplan left half-made in the state directory whose lock the caller
// holds: the broker's scratch repositories of a push or a keeping of work it was making (broker-*, salvage-*, publish-*), and
// a bundle it was writing beside a node's kept work (.salvage-*). None of it is work: the commits are in the
// checkout until they are kept, and kept work is put in place whole, by a rename.
func removeStaleScratch(dir statedir.Dir, run *adapter.Run) {
	stale, _ := filepath.Glob(filepath.Join(dir.Broker(), "*"))
	partial, _ := filepath.Glob(filepath.Join(dir.SalvageRuns(), "*", ".salvage-*"))
	for _, p := range append(stale, partial...) {
		if err := os.RemoveAll(p); err != nil {
			run.Warn("", fmt.Sprintf("could not remove %s, left by a kewplan that died: %v", p, err))
		}
	}
}

func interruptedWarning(r ledger.InterruptedRun) string {
	who := fmt.Sprintf("kewplan pid %d", r.Process.PID)
	if r.Process.Host != "" {
		who += " on " + r.Process.Host
	}
	nodes := "no node was running"
	if len(r.Nodes) > 0 {
		nodes = "interrupted nodes: " + strings.Join(r.Nodes, ", ")
	}
	return fmt.Sprintf("run %s was interrupted: its apply (%s) ended without recording an outcome (killed, out of memory, or its machine went down); last recorded at %s; %s; continue it with `kewplan apply --resume %s`",
		r.ID, who, r.Since.UTC().Format(time.RFC3339), nodes, r.ID)
}

// keepInterruptedWork keeps the work of every interrupted worker whose checkout is still on disk and whose work was
// not kept yet, skipping the runs whose containers may still run.
func keepInterruptedWork(ctx context.Context, l *ledger.Ledger, dir statedir.Dir, run *adapter.Run, unstopped map[string]bool) {
	for _, id := range runsWithCheckouts(dir) {
		if unstopped[id] {
			continue
		}
		rec, nodes, err := l.Run(id)
		if err != nil || rec.Status != ledger.RunInterrupted {
			continue // an unknown directory, or a run that ended: the sweep removes it
		}
		for i := range nodes {
			keepNodeWork(ctx, l, dir, run, &nodes[i])
		}
	}
}

// runsWithCheckouts are the run ids with a directory under the state directory's checkouts, sorted.
func runsWithCheckouts(dir statedir.Dir) []string {
	ents, err := os.ReadDir(dir.Checkouts())
	if err != nil {
		return nil
	}
	var ids []string
	for _, e := range ents {
		if e.IsDir() {
			ids = append(ids, e.Name())
		}
	}
	sort.Strings(ids)
	return ids
}

// interruptedWhy completes "kept because …" for the work of an interrupted node.
const interruptedWhy = "its apply was interrupted (kewplan was killed or its machine went down)"

// keepNodeWork keeps one interrupted worker's work from its last attempt's checkout and records it with the node.
func keepNodeWork(ctx context.Context, l *ledger.Ledger, dir statedir.Dir, run *adapter.Run, n *ledger.NodeRecord) {
	if n.Status != ledger.StatusInterrupted || n.Salvage != nil || n.Role == config.RoleReviewer || n.BaseCommit == "" || n.Slug == "" {
		return
	}
	attempt := n.Attempts
	if attempt < 1 {
		attempt = 1
	}
	co := dir.Checkout(n.RunID, n.Node, n.Slug, attempt)
	if fi, err := os.Lstat(co); err != nil || !fi.IsDir() {
		return
	}
	// The prompt dies first, on this path as on every other.
	if _, err := checkout.RemoveStalePrompt(co); err != nil {
		run.Warn(n.Node, fmt.Sprintf("SECURITY: could not delete the prompt file left in %s: %v", co, err))
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), salvageTimeout)
	defer cancel()
	dest := dir.Salvage(n.RunID, n.Node, n.Slug)
	res, err := broker.Salvage(sctx, broker.SalvageRequest{Checkout: co, BaseCommit: n.BaseCommit, Dest: dest,
		StateDir: dir.Broker(), Environ: run.Environ,
		Message: fmt.Sprintf("Kept by kewplan from node %s (run %s, attempt %d) because %s.", n.Node, n.RunID, attempt, interruptedWhy)})
	if err != nil {
		run.Warn(n.Node, fmt.Sprintf("the work of interrupted node %s of run %s could not be kept: %v", n.Node, n.RunID, err))
		return
	}
	if res.CommitsLost != "" {
		run.Warn(n.Node, fmt.Sprintf("the commits of interrupted node %s of run %s could not be kept: %s", n.Node, n.RunID, res.CommitsLost))
	}
	if !res.Kept {
		return
	}
	skipped := append([]string{}, res.Skipped...)
	if res.SkippedMore > 0 {
		skipped = append(skipped, fmt.Sprintf("and %d more", res.SkippedMore))
	}
	s := &ledger.Salvage{Dir: dest, Why: interruptedWhy, Repo: n.Repo, BaseCommit: n.BaseCommit, Head: res.Head,
		Worktree: res.Worktree, Commits: res.Commits, FilesChanged: res.FilesChanged, Bytes: res.Bytes, Skipped: skipped,
		CommitsLost: res.CommitsLost}
	if err := l.RecordKeptWork(n.RunID, n.Node, s); err != nil {
		run.Warn(n.Node, fmt.Sprintf("kept the work of interrupted node %s of run %s in %s but could not record it: %v", n.Node, n.RunID, dest, err))
		return
	}
	n.Salvage = s
	if n.PushIntent != nil {
		run.Warn(n.Node, fmt.Sprintf("kept %s of interrupted node %s of run %s, whose push to %s had begun when its apply died; whether it landed is asked of the remote",
			s.Summary(), n.Node, n.RunID, n.PushIntent.Branch))
		return
	}
	run.Warn(n.Node, fmt.Sprintf("kept %s of interrupted node %s of run %s; nothing was pushed: publish it with `kewplan salvage %s %s`, or continue the run with `kewplan apply --resume %s`",
		s.Summary(), n.Node, n.RunID, n.RunID, n.Node, n.RunID))
}

// Pushes that may have landed. Before the broker pushes a worker's commits, the loop records the remote, branch
// and exact commit in the ledger (ledger.PushIntent); the node's recorded outcome resolves it. An apply killed
// between the push landing on the remote and that outcome leaves an interrupted node with an open intent: the
// remote alone knows whether the push landed, so it is asked (git ls-remote, bounded). A branch holding exactly
// the intended commit is the push having landed: the node is recorded as the worker that pushed it, so that
// --resume reuses it and its dependants see its commit (running it again from its ref could never fast-forward
// the branch). Anything else leaves it interrupted; an unreachable remote is asked again by the next command.

// remoteAskTimeout bounds asking a remote which commit one branch holds.
const remoteAskTimeout = 30 * time.Second

// resolvePushIntents settles the open push intents of interrupted nodes, skipping the runs for which skip is true
// (their work is not kept yet).
func resolvePushIntents(ctx context.Context, l *ledger.Ledger, dir statedir.Dir, run *adapter.Run, skip func(runID string) bool) {
	intents, err := l.UnresolvedPushIntents()
	if err != nil {
		run.Warn("", fmt.Sprintf("could not read which pushes of interrupted runs had begun: %v", err))
		return
	}
	for _, p := range intents {
		if skip(p.RunID) {
			continue
		}
		qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), remoteAskTimeout)
		held, err := broker.RemoteBranch(qctx, broker.BranchRequest{Repo: p.Repo, Branch: p.Branch, StateDir: dir.Broker(), Environ: run.Environ})
		cancel()
		if err != nil {
			run.Warn(p.Node, fmt.Sprintf("could not ask the remote whether the push of interrupted node %s of run %s to %s had landed, so it stays interrupted (the next command asks again): %v",
				p.Node, p.RunID, p.Branch, err))
			continue
		}
		landed := held == p.Commit
		reason := fmt.Sprintf("pushed %s to %s; its apply died before recording it, and the remote's branch held that commit when the next command asked", p.Commit, p.Branch)
		if err := l.ResolvePushIntent(p, landed, reason); err != nil {
			run.Warn(p.Node, fmt.Sprintf("could not record what the remote said of the push of interrupted node %s of run %s: %v", p.Node, p.RunID, err))
			continue
		}
		if landed {
			run.Warn(p.Node, fmt.Sprintf("the push of %s to %s had landed before apply died; recorded as pushed (commit %s, run %s)", p.Node, p.Branch, p.Commit, p.RunID))
			continue
		}
		holds := "no such branch"
		if held != "" {
			holds = "commit " + held
		}
		run.Warn(p.Node, fmt.Sprintf("the push of %s to %s had not landed before apply died (the remote holds %s, not %s); it stays interrupted: continue the run with `kewplan apply --resume %s`",
			p.Node, p.Branch, holds, p.Commit, p.RunID))
	}
}

// salvageTimeout bounds keeping one interrupted node's work (the engine's own bound for a stopped worker).
const salvageTimeout = 5 * time.Minute

// RecoverOptions are the options of Recover.
type RecoverOptions struct {
	StateDir string
	// Environ is kewplan's environment (DOCKER_HOST, the host's git); nil means os.Environ().
	Environ []string
	// Engine connects to the engine that stops a dead apply's containers; nil is the Docker engine of Environ.
	Engine func(ctx context.Context, run *adapter.Run) (adapter.Engine, error)
}

// Recovery is what Recover found and did, as warnings to show beside the command's output.
type Recovery struct {
	Warnings []string
	// Live is set when an apply holds the state directory: nothing was looked at.
	Live bool
}

// Recover is what a command that runs no node does first with a state directory (runs, runs show, logs, salvage,
// apply --resume): when no apply holds its lock, it recognises the runs of dead applies, marks them interrupted,
// stops their orphaned containers, keeps their nodes' work and removes what is left, as the next apply would.
// The engine is reached only when there is something of a dead apply to stop or keep. A state directory without a
// ledger, or one an apply holds, is left alone; an error means the ledger could not be opened or written.
func Recover(ctx context.Context, opts RecoverOptions) (*Recovery, error) {
	out := &Recovery{}
	dir, err := statedir.New(opts.StateDir)
	if err != nil {
		return out, err
	}
	if _, err := os.Stat(dir.Ledger()); err != nil {
		return out, nil
	}
	lock, err := ledger.LockStateDir(dir)
	if errors.Is(err, ledger.ErrStateLocked) {
		out.Live = true
		return out, nil
	}
	if errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.EROFS) {
		return out, nil // a state directory this user may only read is read as it is
	}
	if err != nil {
		return out, err
	}
	defer lock.Unlock()
	l, err := ledger.Open(dir.Ledger())
	if err != nil {
		return out, err
	}
	defer l.Close()
	environ := opts.Environ
	if environ == nil {
		environ = os.Environ()
	}
	run := &adapter.Run{Dir: dir, Environ: environ, PID: os.Getpid(),
		Known: func(id string) bool {
			_, _, err := l.Run(id)
			return err == nil
		},
		Warn: func(node, msg string) { out.Warnings = append(out.Warnings, msg) },
	}
	if !needsRecovery(l, dir) {
		return out, nil
	}
	connect := opts.Engine
	if connect == nil {
		connect = docker.ForRecovery
	}
	eng, err := connect(ctx, run)
	if err != nil {
		run.Warn("", fmt.Sprintf("could not reach the engine to stop the containers of interrupted runs: %v", err))
		eng = nil
	} else {
		defer eng.Close()
	}
	recoverInterrupted(ctx, l, dir, eng, run)
	return out, nil
}

// needsRecovery reports whether the ledger records a run still running (its apply is dead: the caller holds the
// lock), an interrupted run whose checkouts are still on disk, or a push of an interrupted node that may have
// landed.
func needsRecovery(l *ledger.Ledger, dir statedir.Dir) bool {
	runs, err := l.Runs()
	if err != nil {
		return true // let recoverInterrupted report it
	}
	if open, err := l.UnresolvedPushIntents(); err != nil || len(open) > 0 {
		return true
	}
	for _, r := range runs {
		switch r.Status {
		case ledger.RunRunning:
			return true
		case ledger.RunInterrupted:
			if _, err := os.Stat(dir.RunCheckouts(r.ID)); err == nil {
				return true
			}
		}
	}
	return false
}
