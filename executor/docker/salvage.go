package docker

import (
	"context"
	"fmt"
	"time"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/executor/adapter"
	"github.com/kewplan/kewplan/executor/broker"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/internal/money"
)

// salvageTimeout bounds keeping a stopped worker's work: it runs after a cancellation too, so it cannot take the
// apply's context.
const salvageTimeout = 5 * time.Minute

// keepWork keeps what a worker made when its attempt ends without its push (f says why), before the loop removes
// the checkout: the host broker copies and verifies its commits and builds a commit of its uncommitted files,
// into the state directory (statedir.Salvage). Nothing is pushed. It never changes the attempt's outcome: a
// salvage that fails is a warning.
func (d *dockerEngine) keepWork(ctx context.Context, at *adapter.Attempt, repo, base string, f *adapter.Failure, pushRefused bool) {
	if at.Node.Role == config.RoleReviewer || base == "" || f == nil || f.Status == ledger.StatusSkipped {
		return
	}
	np := at.Node
	why := salvageWhy(at.Result, np.Timeout, f, pushRefused)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), salvageTimeout)
	defer cancel()
	res, err := broker.Salvage(sctx, broker.SalvageRequest{
		Checkout: at.Checkout, BaseCommit: base, Dest: d.run.Dir.Salvage(d.run.ID, np.Name, np.Slug),
		StateDir: d.run.Dir.Broker(), Environ: d.run.Environ,
		Message: fmt.Sprintf("Kept by kewplan from node %s (run %s, attempt %d) because %s.", np.Name, d.run.ID, at.Number, why),
	})
	if err != nil {
		at.Warn("the agent's work could not be kept: " + err.Error())
		return
	}
	if res.CommitsLost != "" {
		at.Warn("the agent's commits could not be kept: " + res.CommitsLost)
	}
	if !res.Kept {
		return
	}
	at.Result.Salvage = &ledger.Salvage{Dir: d.run.Dir.Salvage(d.run.ID, np.Name, np.Slug), Why: why, Repo: repo,
		BaseCommit: base, Head: res.Head, Worktree: res.Worktree, Commits: res.Commits, FilesChanged: res.FilesChanged,
		Bytes: res.Bytes, Skipped: skippedList(res), CommitsLost: res.CommitsLost,
		ProtectedBranches: np.ProtectedBranches, AllowProtectedPush: np.AllowProtectedPush, ProtectionsRecorded: true}
	at.Warn(fmt.Sprintf("kept %s because %s; nothing was pushed: publish it with `kewplan salvage %s %s`",
		at.Result.Salvage.Summary(), why, d.run.ID, np.Name))
}

func skippedList(res *broker.SalvageResult) []string {
	s := append([]string{}, res.Skipped...)
	if res.SkippedMore > 0 {
		s = append(s, fmt.Sprintf("and %d more", res.SkippedMore))
	}
	return s
}

// salvageWhy completes "kept because …" from what the loop knows for certain (the cap, the timeout, the
// status), never from the agent's own words: it goes into a commit message.
func salvageWhy(res *ledger.NodeResult, timeout time.Duration, f *adapter.Failure, pushRefused bool) string {
	switch {
	case pushRefused && f.Status == ledger.StatusHeld:
		return "its commits were held for a human instead of pushed"
	case pushRefused:
		return "its push was refused"
	}
	switch f.Status {
	case ledger.StatusBudgetExceeded:
		b := res.Budget
		if b == nil {
			return "its budget was reached"
		}
		scope := "the budget"
		if b.Scope == "apply" {
			scope = "the apply-wide budget"
		}
		if b.Cap == "max_usd" {
			return fmt.Sprintf("%s of %s was reached", scope, money.USD(b.Limit))
		}
		return fmt.Sprintf("%s's %s of %g was reached", scope, b.Cap, b.Limit)
	case ledger.StatusTimedOut:
		if timeout <= 0 {
			timeout = adapter.DefaultTimeout
		}
		return fmt.Sprintf("it was killed at its %s timeout", timeout)
	case ledger.StatusCancelled:
		return "the apply was cancelled"
	case ledger.StatusInterrupted:
		return "the Docker engine stopped answering"
	case ledger.StatusHeld:
		return "it was held for a human"
	}
	return "the agent failed"
}
