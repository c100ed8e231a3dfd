package adapter

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/kewplan/kewplan/budget"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/verdict"
	"github.com/kewplan/kewplan/planner"
)

// VerdictStatus turns a reviewer's parsed verdict into the node's status, on every engine: approve succeeds (the
// Result's status is set), request_changes and reject fail, anything else holds the node for a human.
func VerdictStatus(v *verdict.Verdict, res *ledger.NodeResult) *Failure {
	switch v.Verdict {
	case verdict.Approve:
		res.Status = ledger.StatusApproved
		return nil
	case verdict.RequestChanges:
		return Failed(ledger.StatusChangesRequested, "the reviewer requested changes")
	case verdict.Reject:
		return Failed(ledger.StatusRejected, "the reviewer rejected the change")
	}
	return Failed(ledger.StatusHeld, fmt.Sprintf("held for a human: unknown verdict %q", v.Verdict))
}

// BudgetReason is the reason recorded with budget_exceeded; stopped says what kewplan did to the agent ("kewplan
// killed its container", "kewplan deleted its Job").
func BudgetReason(b *ledger.BudgetStop, killed bool, stopped string) string {
	reason := b.Message
	if b.Cap == budget.CapMaxUSD && b.Source == budget.SourceEstimated {
		reason += " (estimated: tokens × price)"
	}
	if killed {
		reason += "; " + stopped
	} else {
		reason += "; the agent had already ended"
	}
	return reason
}

// ExitReason explains an agent's non-zero exit status, quoting the last line it wrote (lastLine, "" for none).
func ExitReason(np *planner.NodePlan, code int64, lastLine string) string {
	reason := fmt.Sprintf("the agent exited with status %d", code)
	if code == 137 {
		// kewplan did not kill it (timeout and cancellation are judged first), and nothing inside the container
		// can SIGKILL its init: the kernel's OOM killer did, or someone killed it by hand.
		reason = "the agent was killed by SIGKILL (status 137) although kewplan did not kill it: most likely the kernel's OOM killer"
		if np.Container != nil && np.Container.Memory != "" {
			reason += fmt.Sprintf(" at the node's %s memory limit (raise memory in the sandbox block if the agent needs more)", np.Container.Memory)
		} else {
			reason += " (the node has no memory limit, so the host ran out of memory)"
		}
	}
	if lastLine != "" {
		reason += ": " + lastLine
	}
	return reason
}

// TailWriter keeps the last Max bytes written, for a failure's reason.
type TailWriter struct {
	mu  sync.Mutex
	Max int
	buf []byte
}

func (t *TailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.Max {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-t.Max:]...)
	}
	return len(p), nil
}

// String is everything kept, as valid UTF-8 and trimmed.
func (t *TailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(strings.ToValidUTF8(string(t.buf), "\uFFFD"))
}

// LastLine is the last non-empty line written, trimmed to valid UTF-8 and 200 bytes. It is agent text: views
// sanitise it before display.
func (t *TailWriter) LastLine() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return LastLine(string(t.buf))
}

// LastLine is the last non-empty line of s, trimmed to valid UTF-8 and 200 bytes.
func LastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\r\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l == "" {
			continue
		}
		l = strings.ToValidUTF8(l, "\uFFFD")
		if len(l) > 200 {
			cut := 200
			for cut > 0 && !utf8.RuneStart(l[cut]) {
				cut--
			}
			l = l[:cut] + "…"
		}
		return l
	}
	return ""
}

// NodePlanProblem is what makes a node unrunnable on any engine, read from its plan: errors, or a runner that
// forwards no credential. "" when there is none.
func NodePlanProblem(np *planner.NodePlan) string {
	if np.Errors || (np.Container == nil && len(np.Unknown) == 0) {
		return fmt.Sprintf("node %q has errors in the plan; run `kewplan plan` to see them", np.Name)
	}
	if len(np.Credentials) == 0 {
		return fmt.Sprintf("node %q: runner %q forwards no credential, so the agent could not authenticate; declare the runner's credentials", np.Name, np.Runner)
	}
	return ""
}

// JoinReason joins two parts of a failure's reason, either of which may be empty.
func JoinReason(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	default:
		return a + "; " + b
	}
}
