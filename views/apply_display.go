package views

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/kewplan/kewplan/internal/termsafe"

	"github.com/kewplan/kewplan/executor"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/statedir"
	"github.com/kewplan/kewplan/planner"
	"github.com/kewplan/kewplan/runners"
)

// applyDisplay shows apply's progress to people; it is an executor.Hook. Plain, it prints one line per node start
// and end (for logs and pipes); live, it keeps one line per node up to date on a terminal. Every string that came
// from an agent (reasons quoting its stderr, models, session ids, verdict summaries) is sanitised before it is
// written, so an agent cannot drive the terminal.
type applyDisplay struct {
	executor.NilHook
	w     io.Writer
	live  bool
	color bool
	now   func() time.Time
	// refresh is how often the live block redraws its elapsed times; 0 disables the timer (tests).
	refresh time.Duration

	mu     sync.Mutex
	order  []string
	nodes  map[string]*liveNode
	drawn  int // lines of the live block currently on screen
	stop   chan struct{}
	done   chan struct{}
	closed bool
}

type liveNode struct {
	status  string
	runner  string
	started time.Time
	ended   time.Time
	totals  runners.RunTotals
	reason  string
	// costUSD and costSource are the cost so far and where it came from ("" until the executor says).
	costUSD    *float64
	costSource string
	// budgetWarn is the warn_at crossing the node raised, "" when none.
	budgetWarn string
}

// cost shows the node's cost so far with its source, or the agent's reported figure when no source is known.
func (n *liveNode) cost() string {
	if n.costSource != "" {
		return formatCostSource(n.costUSD, n.costSource)
	}
	return formatCost(n.totals.CostUSD)
}

// newApplyDisplay returns a display writing to w: live keeps a block of node lines up to date (a terminal), color
// enables ANSI styling.
func newApplyDisplay(w io.Writer, live, color bool) *applyDisplay {
	return &applyDisplay{w: w, live: live, color: color, now: time.Now, refresh: time.Second, nodes: map[string]*liveNode{}}
}

var _ executor.Hook = (*applyDisplay)(nil)

// Close stops the live refresh; ApplyDone calls it too.
func (v *applyDisplay) Close() {
	v.mu.Lock()
	if v.closed {
		v.mu.Unlock()
		return
	}
	v.closed = true
	stop, done := v.stop, v.done
	v.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

// ApplyStart implements executor.Hook.
func (v *applyDisplay) ApplyStart(e executor.ApplyStartEvent) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.order = append([]string(nil), e.Nodes...)
	for _, n := range e.Nodes {
		v.nodes[n] = &liveNode{status: ledger.StatusPending}
	}
	fmt.Fprintf(v.w, "%s %s: %s, at most %d at once.\n", v.bold("Applying run"), termsafe.String(e.RunID), count(len(e.Nodes), "node", "nodes"), e.Parallelism)
	for _, w := range e.Warnings {
		fmt.Fprintln(v.w, v.yellow("Warning: ")+termsafe.String(w))
	}
	if v.live {
		v.drawLocked()
		if v.refresh > 0 {
			v.stop, v.done = make(chan struct{}), make(chan struct{})
			go v.tick(v.stop, v.done, v.refresh)
		}
	}
}

// tick refreshes elapsed times on the live block.
func (v *applyDisplay) tick(stop, done chan struct{}, every time.Duration) {
	defer close(done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			v.mu.Lock()
			v.drawLocked()
			v.mu.Unlock()
		}
	}
}

// NodeStart implements executor.Hook.
func (v *applyDisplay) NodeStart(e executor.NodeStartEvent) {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := v.node(e.Node)
	n.status, n.runner, n.started = ledger.StatusRunning, e.Runner, e.Time
	if v.live {
		v.drawLocked()
		return
	}
	fmt.Fprintf(v.w, "%s: started (%s, %s)\n", termsafe.String(e.Node), termsafe.String(e.Runner), termsafe.String(e.Model))
}

// NodeProgress implements executor.Hook. Plain, it prints nothing for progress: only starts and ends.
func (v *applyDisplay) NodeProgress(e executor.NodeProgressEvent) {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := v.node(e.Node)
	n.totals = e.Totals
	if e.CostSource != "" {
		n.costUSD, n.costSource = e.CostUSD, e.CostSource
	}
	v.drawLocked()
}

// BudgetWarning implements executor.Hook: a line above the live block (or in the plain log), and a mark on the
// node's live line.
func (v *applyDisplay) BudgetWarning(e executor.BudgetWarningEvent) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.node(e.Node).budgetWarn = e.Message
	v.clearLocked()
	msg := e.Message
	if e.Source == ledger.CostEstimated {
		msg += " (estimated)"
	}
	fmt.Fprintln(v.w, v.yellow("Budget warning: "+e.Node+": ")+termsafe.Flatten(msg))
	v.drawLocked()
}

// NodeDone implements executor.Hook.
func (v *applyDisplay) NodeDone(r ledger.NodeResult) {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := v.node(r.Node)
	n.status, n.totals, n.reason, n.ended = r.Status, r.Totals, r.Reason, r.Ended
	if c, src := r.RecordedCost(); src != "" {
		n.costUSD, n.costSource = c, src
	}
	if r.BudgetWarning != "" {
		n.budgetWarn = r.BudgetWarning
	}
	if r.Status == ledger.StatusReused {
		n.reason = r.ReusedFrom
	}
	if n.runner == "" {
		n.runner = r.Runner
	}
	if v.live {
		v.drawLocked()
		return
	}
	fmt.Fprintln(v.w, v.doneLine(r.Node, n, r.Duration()))
}

// NodeRetry implements executor.Hook: the node stays running, its line says which attempt comes and why.
func (v *applyDisplay) NodeRetry(e executor.NodeRetryEvent) {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := v.node(e.Node)
	n.reason = fmt.Sprintf("attempt %d of %d in %s after %s", e.NextAttempt, e.MaxAttempts, formatDuration(e.Wait), termsafe.Flatten(e.Reason))
	if v.live {
		v.drawLocked()
		return
	}
	fmt.Fprintf(v.w, "%s: attempt %d of %d failed (%s); retrying in %s\n", e.Node, e.Attempt, e.MaxAttempts, termsafe.Flatten(e.Reason), formatDuration(e.Wait))
}

// Warning implements executor.Hook.
func (v *applyDisplay) Warning(e executor.WarningEvent) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.clearLocked()
	prefix := "Warning: "
	if e.Node != "" {
		prefix = "Warning: " + termsafe.String(e.Node) + ": "
	}
	fmt.Fprintln(v.w, v.yellow(prefix)+termsafe.String(e.Message))
	v.drawLocked()
}

// ApplyDone implements executor.Hook: the summary table and the totals.
func (v *applyDisplay) ApplyDone(s executor.ApplySummary) {
	v.Close()
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.live {
		v.drawLocked()
		v.drawn = 0 // the final block stays on screen
	}
	fmt.Fprintln(v.w)
	succeeded := v.summaryTable(s)
	var failed []string
	for i := range s.Nodes {
		if r := &s.Nodes[i]; !ledger.NodeSucceeded(r.Status) && r.Reason != "" {
			failed = append(failed, fmt.Sprintf("  %s (%s): %s", termsafe.String(r.Node), r.Status, termsafe.String(r.Reason)))
		}
	}
	if len(failed) > 0 {
		fmt.Fprintln(v.w, "\n"+strings.Join(failed, "\n"))
	}
	v.budgetLines(s)
	switch s.Status {
	case ledger.RunSucceeded:
		fmt.Fprintf(v.w, "\n%s %d of %d nodes succeeded in %s.\n", v.green("Apply complete!"), succeeded, len(s.Nodes), formatDuration(s.Ended.Sub(s.Started)))
	case ledger.RunCancelled:
		fmt.Fprintf(v.w, "\n%s %d of %d nodes succeeded before the interrupt.\n", v.red("Apply cancelled."), succeeded, len(s.Nodes))
	default:
		fmt.Fprintf(v.w, "\n%s %d of %d nodes succeeded.\n", v.red("Apply failed."), succeeded, len(s.Nodes))
	}
	if line := egressSummaryLine(s); line != "" {
		fmt.Fprintln(v.w, v.yellow(line))
	}
	details := "kewplan runs show " + s.RunID
	if s.StateDir != "" && filepath.Clean(s.StateDir) != statedir.DefaultName {
		details += " --state-dir " + planner.ShellQuote(s.StateDir)
	}
	fmt.Fprintf(v.w, "Details: %s\n", termsafe.String(details))
}

// summaryTable writes one row per node and the run's totals; it returns how many nodes succeeded.
func (v *applyDisplay) summaryTable(s executor.ApplySummary) int {
	rows := [][]string{{"NODE", "RUNNER", "STATUS", "DURATION", "TOKENS IN", "TOKENS OUT", "COST"}}
	succeeded := 0
	for i := range s.Nodes {
		r := &s.Nodes[i]
		if ledger.NodeSucceeded(r.Status) {
			succeeded++
		}
		rows = append(rows, []string{r.Node, r.Runner, r.Status, formatDuration(r.Duration()),
			humanize.Comma(r.Totals.InputTokens), humanize.Comma(r.Totals.OutputTokens), nodeCost(r)})
	}
	applyTable(v.w, rows)
	fmt.Fprintf(v.w, "\nTotals: %s input, %s output, %s cache read, %s cache write tokens; cost %s.\n",
		humanize.Comma(s.InputTokens), humanize.Comma(s.OutputTokens), humanize.Comma(s.CacheReadTokens), humanize.Comma(s.CacheWriteTokens),
		formatCostTotal(s.CostUSD, s.CostSource, s.CostEstimated, s.CostUnknown))
	return succeeded
}

// nodeCost is a node's recorded cost with its source; "-" for a node that never ran.
func nodeCost(r *ledger.NodeResult) string {
	c, src := r.RecordedCost()
	return formatCostSource(c, src)
}

// budgetLines tells, after the table, the warn_at crossings and the apply-wide cap that stopped the apply.
func (v *applyDisplay) budgetLines(s executor.ApplySummary) {
	var warned []string
	for i := range s.Nodes {
		if r := &s.Nodes[i]; r.BudgetWarning != "" {
			warned = append(warned, fmt.Sprintf("  %s: %s", r.Node, termsafe.Flatten(r.BudgetWarning)))
		}
	}
	if len(warned) > 0 {
		fmt.Fprintln(v.w, "\n"+v.yellow("Budget warnings:")+"\n"+strings.Join(warned, "\n"))
	}
	if b := s.BudgetStop; b != nil {
		fmt.Fprintf(v.w, "\n%s %s: kewplan started nothing new, killed the nodes still running and skipped the rest.\n", v.red("Budget exceeded:"), b.Message)
	}
}

func (v *applyDisplay) node(name string) *liveNode {
	n := v.nodes[name]
	if n == nil {
		n = &liveNode{status: ledger.StatusPending}
		v.nodes[name] = n
		v.order = append(v.order, name)
	}
	return n
}

// clearLocked erases the live block so that a warning can be printed above it.
func (v *applyDisplay) clearLocked() {
	if !v.live || v.drawn == 0 {
		return
	}
	fmt.Fprintf(v.w, "\x1b[%dA\x1b[J", v.drawn)
	v.drawn = 0
}

// drawLocked redraws the live block: one line per node.
func (v *applyDisplay) drawLocked() {
	if !v.live {
		return
	}
	var b strings.Builder
	if v.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", v.drawn)
	}
	now := v.now()
	for _, name := range v.order {
		n := v.nodes[name]
		elapsed := time.Duration(0)
		if !n.started.IsZero() {
			end := n.ended
			if end.IsZero() {
				end = now
			}
			elapsed = end.Sub(n.started)
		}
		b.WriteString("\x1b[2K")
		b.WriteString(v.liveLine(name, n, elapsed))
		b.WriteString("\n")
	}
	v.drawn = len(v.order)
	io.WriteString(v.w, b.String())
}

func (v *applyDisplay) liveLine(name string, n *liveNode, elapsed time.Duration) string {
	status := v.statusColor(n.status, len(ledger.StatusBudgetExceeded))
	line := fmt.Sprintf("  %-20s %s", termsafe.String(name), status)
	if n.status != ledger.StatusPending && n.status != ledger.StatusSkipped {
		line += fmt.Sprintf("  %6s  %s tokens  %s", formatDuration(elapsed), humanize.Comma(n.totals.InputTokens+n.totals.OutputTokens), n.cost())
	}
	if n.budgetWarn != "" && n.status == ledger.StatusRunning {
		line += "  " + v.yellow("[budget warn_at crossed]")
	}
	if n.reason != "" && !ledger.NodeSucceeded(n.status) {
		line += "  " + applyTruncate(termsafe.String(n.reason), 80)
	}
	return line
}

func (v *applyDisplay) doneLine(name string, n *liveNode, d time.Duration) string {
	line := fmt.Sprintf("%s: %s", termsafe.String(name), v.statusColor(n.status, 0))
	if n.status == ledger.StatusReused {
		return line + " from run " + termsafe.Flatten(n.reason) + " (nothing started)"
	}
	if n.status != ledger.StatusSkipped && n.status != ledger.StatusCancelled || !n.started.IsZero() {
		cost := "cost unknown"
		if n.totals.CostUSD != nil || n.costSource != "" && n.costUSD != nil {
			cost = n.cost()
		}
		line += fmt.Sprintf(" in %s (%s tokens, %s)", formatDuration(d), humanize.Comma(n.totals.InputTokens+n.totals.OutputTokens), cost)
	}
	if n.reason != "" && !ledger.NodeSucceeded(n.status) {
		line += ": " + termsafe.String(n.reason)
	}
	return line
}

// statusColor styles a status, padded to width first so columns stay aligned.
func (v *applyDisplay) statusColor(status string, width int) string {
	if pad := width - len(status); pad > 0 {
		return v.statusColor(status, 0) + strings.Repeat(" ", pad)
	}
	switch {
	case ledger.NodeSucceeded(status):
		return v.green(status)
	case status == ledger.StatusRunning || status == ledger.StatusPending:
		return status
	case status == ledger.StatusSkipped || status == ledger.StatusHeld:
		return v.yellow(status)
	default:
		return v.red(status)
	}
}

func (v *applyDisplay) style(code, s string) string {
	if !v.color {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

func (v *applyDisplay) bold(s string) string   { return v.style("1", s) }
func (v *applyDisplay) green(s string) string  { return v.style("32", s) }
func (v *applyDisplay) yellow(s string) string { return v.style("33", s) }
func (v *applyDisplay) red(s string) string    { return v.style("31", s) }
