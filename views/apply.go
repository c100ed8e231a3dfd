package views

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/kewplan/kewplan/executor"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/planner"
	"github.com/kewplan/kewplan/runners"
)

// ApplyMode chooses how apply's progress is shown.
type ApplyMode int

const (
	// ApplyPlain prints one line per event: for logs and pipes.
	ApplyPlain ApplyMode = iota
	// ApplyLive keeps one line per node up to date on a terminal.
	ApplyLive
	// ApplyJSON streams NDJSON events: apply_start, node_start, node_progress, node_done, warning, apply_done.
	ApplyJSON
)

// ApplyView renders apply's hook events. It implements executor.Hook. Every string that came from an agent
// (reasons quoting its stderr, models, session ids, verdict summaries) is sanitised before it is written, so an
// agent cannot drive the terminal.
type ApplyView struct {
	executor.NilHook
	w     io.Writer
	mode  ApplyMode
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
}

// NewApplyView returns a view writing to w. color enables ANSI styling (live and plain modes only).
func NewApplyView(w io.Writer, mode ApplyMode, color bool) *ApplyView {
	return &ApplyView{w: w, mode: mode, color: color, now: time.Now, refresh: time.Second, nodes: map[string]*liveNode{}}
}

var _ executor.Hook = (*ApplyView)(nil)

// Close stops the live refresh; ApplyDone calls it too.
func (v *ApplyView) Close() {
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

func (v *ApplyView) emitJSON(obj map[string]any) {
	b, err := json.Marshal(obj)
	if err != nil {
		return
	}
	v.w.Write(append(b, '\n'))
}

// ApplyStart implements executor.Hook.
func (v *ApplyView) ApplyStart(e executor.ApplyStartEvent) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.order = append([]string(nil), e.Nodes...)
	for _, n := range e.Nodes {
		v.nodes[n] = &liveNode{status: ledger.StatusPending}
	}
	switch v.mode {
	case ApplyJSON:
		obj := map[string]any{"type": "apply_start", "time": e.Time.UTC().Format(time.RFC3339Nano), "run_id": e.RunID,
			"state_dir": e.StateDir, "config_digest": e.ConfigDigest, "nodes": applyStrings(e.Nodes), "parallelism": e.Parallelism}
		if len(e.Warnings) > 0 {
			warnings := make([]string, len(e.Warnings))
			for i, w := range e.Warnings {
				warnings[i] = Sanitize(w)
			}
			obj["warnings"] = warnings
		}
		v.emitJSON(obj)
	default:
		fmt.Fprintf(v.w, "%s %s: %s, at most %d at once.\n", v.bold("Applying run"), e.RunID, applyPlural(len(e.Nodes), "node", "nodes"), e.Parallelism)
		for _, w := range e.Warnings {
			fmt.Fprintln(v.w, v.yellow("Warning: ")+Sanitize(w))
		}
		if v.mode == ApplyLive {
			v.drawLocked()
			if v.refresh > 0 {
				v.stop, v.done = make(chan struct{}), make(chan struct{})
				go v.tick(v.stop, v.done, v.refresh)
			}
		}
	}
}

// tick refreshes elapsed times on the live block.
func (v *ApplyView) tick(stop, done chan struct{}, every time.Duration) {
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
func (v *ApplyView) NodeStart(e executor.NodeStartEvent) {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := v.node(e.Node)
	n.status, n.runner, n.started = ledger.StatusRunning, e.Runner, e.Time
	switch v.mode {
	case ApplyJSON:
		v.emitJSON(map[string]any{"type": "node_start", "time": e.Time.UTC().Format(time.RFC3339Nano), "run_id": e.RunID,
			"node": e.Node, "runner": e.Runner, "image": e.Image, "model": Sanitize(e.Model)})
	case ApplyLive:
		v.drawLocked()
	default:
		fmt.Fprintf(v.w, "%s: started (%s, %s)\n", e.Node, e.Runner, Sanitize(e.Model))
	}
}

// NodeProgress implements executor.Hook. Plain mode prints nothing for progress: only starts and ends.
func (v *ApplyView) NodeProgress(e executor.NodeProgressEvent) {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := v.node(e.Node)
	n.totals = e.Totals
	switch v.mode {
	case ApplyJSON:
		obj := applyTotalsJSON(e.Totals)
		obj["type"], obj["time"], obj["run_id"], obj["node"] = "node_progress", e.Time.UTC().Format(time.RFC3339Nano), e.RunID, e.Node
		obj["elapsed_ms"] = e.Elapsed.Milliseconds()
		v.emitJSON(obj)
	case ApplyLive:
		v.drawLocked()
	}
}

// NodeDone implements executor.Hook.
func (v *ApplyView) NodeDone(r ledger.NodeResult) {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := v.node(r.Node)
	n.status, n.totals, n.reason, n.ended = r.Status, r.Totals, r.Reason, r.Ended
	if n.runner == "" {
		n.runner = r.Runner
	}
	switch v.mode {
	case ApplyJSON:
		obj := applyNodeJSON(&r)
		obj["type"], obj["time"] = "node_done", r.Ended.UTC().Format(time.RFC3339Nano)
		v.emitJSON(obj)
	case ApplyLive:
		v.drawLocked()
	default:
		fmt.Fprintln(v.w, v.doneLine(r.Node, n, r.Duration()))
	}
}

// Warning implements executor.Hook.
func (v *ApplyView) Warning(e executor.WarningEvent) {
	v.mu.Lock()
	defer v.mu.Unlock()
	msg := Sanitize(e.Message)
	switch v.mode {
	case ApplyJSON:
		obj := map[string]any{"type": "warning", "time": e.Time.UTC().Format(time.RFC3339Nano), "run_id": e.RunID, "message": msg}
		if e.Node != "" {
			obj["node"] = e.Node
		}
		v.emitJSON(obj)
	default:
		v.clearLocked()
		prefix := "Warning: "
		if e.Node != "" {
			prefix = "Warning: " + e.Node + ": "
		}
		fmt.Fprintln(v.w, v.yellow(prefix)+msg)
		v.drawLocked()
	}
}

// ApplyDone implements executor.Hook: the summary table and the totals.
func (v *ApplyView) ApplyDone(s executor.ApplySummary) {
	v.Close()
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.mode == ApplyJSON {
		nodes := make([]map[string]any, 0, len(s.Nodes))
		for i := range s.Nodes {
			nodes = append(nodes, applyNodeJSON(&s.Nodes[i]))
		}
		v.emitJSON(map[string]any{"type": "apply_done", "time": s.Ended.UTC().Format(time.RFC3339Nano), "run_id": s.RunID,
			"status": s.Status, "duration_ms": s.Ended.Sub(s.Started).Milliseconds(), "nodes": nodes,
			"totals": map[string]any{"input_tokens": s.InputTokens, "output_tokens": s.OutputTokens,
				"cache_read_tokens": s.CacheReadTokens, "cache_write_tokens": s.CacheWriteTokens, "cost_usd": s.CostUSD}})
		return
	}
	if v.mode == ApplyLive {
		v.drawLocked()
		v.drawn = 0 // the final block stays on screen
	}
	fmt.Fprintln(v.w)
	rows := [][]string{{"NODE", "RUNNER", "STATUS", "DURATION", "TOKENS IN", "TOKENS OUT", "COST"}}
	succeeded := 0
	for i := range s.Nodes {
		r := &s.Nodes[i]
		if ledger.NodeSucceeded(r.Status) {
			succeeded++
		}
		rows = append(rows, []string{r.Node, r.Runner, r.Status, FormatDuration(r.Duration()),
			FormatCount(r.Totals.InputTokens), FormatCount(r.Totals.OutputTokens), FormatCost(r.Totals.CostUSD)})
	}
	applyTable(v.w, rows)
	fmt.Fprintf(v.w, "\nTotals: %s input, %s output, %s cache read, %s cache write tokens; cost %s.\n",
		FormatCount(s.InputTokens), FormatCount(s.OutputTokens), FormatCount(s.CacheReadTokens), FormatCount(s.CacheWriteTokens), FormatCost(s.CostUSD))
	var failed []string
	for i := range s.Nodes {
		if r := &s.Nodes[i]; !ledger.NodeSucceeded(r.Status) && r.Reason != "" {
			failed = append(failed, fmt.Sprintf("  %s (%s): %s", r.Node, r.Status, Sanitize(r.Reason)))
		}
	}
	if len(failed) > 0 {
		fmt.Fprintln(v.w, "\n"+strings.Join(failed, "\n"))
	}
	switch s.Status {
	case ledger.RunSucceeded:
		fmt.Fprintf(v.w, "\n%s %d of %d nodes succeeded in %s.\n", v.green("Apply complete!"), succeeded, len(s.Nodes), FormatDuration(s.Ended.Sub(s.Started)))
	case ledger.RunCancelled:
		fmt.Fprintf(v.w, "\n%s %d of %d nodes succeeded before the interrupt.\n", v.red("Apply cancelled."), succeeded, len(s.Nodes))
	default:
		fmt.Fprintf(v.w, "\n%s %d of %d nodes succeeded.\n", v.red("Apply failed."), succeeded, len(s.Nodes))
	}
	details := "kewplan runs show " + s.RunID
	if s.StateDir != "" && filepath.Clean(s.StateDir) != executor.DefaultStateDir {
		details += " --state-dir " + planner.ShellQuote(s.StateDir)
	}
	fmt.Fprintf(v.w, "Details: %s\n", Sanitize(details))
}

func (v *ApplyView) node(name string) *liveNode {
	n := v.nodes[name]
	if n == nil {
		n = &liveNode{status: ledger.StatusPending}
		v.nodes[name] = n
		v.order = append(v.order, name)
	}
	return n
}

// clearLocked erases the live block so that a warning can be printed above it.
func (v *ApplyView) clearLocked() {
	if v.mode != ApplyLive || v.drawn == 0 {
		return
	}
	fmt.Fprintf(v.w, "\x1b[%dA\x1b[J", v.drawn)
	v.drawn = 0
}

// drawLocked redraws the live block: one line per node.
func (v *ApplyView) drawLocked() {
	if v.mode != ApplyLive {
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

func (v *ApplyView) liveLine(name string, n *liveNode, elapsed time.Duration) string {
	status := v.statusColor(n.status, 10)
	line := fmt.Sprintf("  %-20s %s", name, status)
	if n.status != ledger.StatusPending && n.status != ledger.StatusSkipped {
		line += fmt.Sprintf("  %6s  %s tokens  %s", FormatDuration(elapsed), FormatCount(n.totals.InputTokens+n.totals.OutputTokens), FormatCost(n.totals.CostUSD))
	}
	if n.reason != "" && !ledger.NodeSucceeded(n.status) {
		line += "  " + applyTruncate(Sanitize(n.reason), 80)
	}
	return line
}

func (v *ApplyView) doneLine(name string, n *liveNode, d time.Duration) string {
	line := fmt.Sprintf("%s: %s", name, v.statusColor(n.status, 0))
	if n.status != ledger.StatusSkipped && n.status != ledger.StatusCancelled || !n.started.IsZero() {
		cost := "cost unknown"
		if n.totals.CostUSD != nil {
			cost = FormatCost(n.totals.CostUSD)
		}
		line += fmt.Sprintf(" in %s (%s tokens, %s)", FormatDuration(d), FormatCount(n.totals.InputTokens+n.totals.OutputTokens), cost)
	}
	if n.reason != "" && !ledger.NodeSucceeded(n.status) {
		line += ": " + Sanitize(n.reason)
	}
	return line
}

// statusColor styles a status, padded to width first so columns stay aligned.
func (v *ApplyView) statusColor(status string, width int) string {
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

func (v *ApplyView) style(code, s string) string {
	if !v.color {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

func (v *ApplyView) bold(s string) string   { return v.style("1", s) }
func (v *ApplyView) green(s string) string  { return v.style("32", s) }
func (v *ApplyView) yellow(s string) string { return v.style("33", s) }
func (v *ApplyView) red(s string) string    { return v.style("31", s) }

// applyTotalsJSON is a node's telemetry in the NDJSON events and in `runs --json`.
func applyTotalsJSON(t runners.RunTotals) map[string]any {
	return map[string]any{
		"reported_model": Sanitize(t.Model), "model_source": t.ModelSource, "session_id": Sanitize(t.SessionID),
		"input_tokens": t.InputTokens, "output_tokens": t.OutputTokens, "cache_read_tokens": t.CacheReadTokens,
		"cache_write_tokens": t.CacheWriteTokens, "cost_usd": t.CostUSD, "events": t.Events,
		"unparsed_lines": t.UnparsedLines, "oversized_lines": t.OversizedLines,
	}
}

func applyNodeJSON(r *ledger.NodeResult) map[string]any {
	obj := applyTotalsJSON(r.Totals)
	obj["run_id"], obj["node"], obj["runner"], obj["role"] = r.RunID, r.Node, r.Runner, r.Role
	obj["image"], obj["image_id"], obj["routed_model"] = r.Image, r.ImageID, r.Model
	obj["status"], obj["reason"], obj["exit_code"] = r.Status, Sanitize(r.Reason), r.ExitCode
	obj["duration_ms"] = r.Duration().Milliseconds()
	obj["argv"] = applyStrings(r.Argv)
	obj["prompt_sha256"] = r.PromptSHA256
	obj["stdout_log"], obj["stderr_log"] = r.StdoutLog, r.StderrLog
	obj["commit"], obj["branch"], obj["pushed"], obj["pull_request"] = r.Commit, r.Branch, r.Pushed, r.PullRequest
	if r.Verdict != nil {
		obj["verdict"] = r.Verdict.Verdict
		obj["verdict_summary"] = Sanitize(r.Verdict.Summary)
	}
	return obj
}

func applyStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Sanitize makes an untrusted string safe to show on a terminal: C0 and C1 control characters (ESC included, so
// no escape sequence survives) and DEL are dropped, newlines and tabs become spaces, invalid UTF-8 becomes U+FFFD.
func Sanitize(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f || c >= 0x80 {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		s = s[size:]
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteRune(utf8.RuneError)
		case r == '\n' || r == '\t' || r == '\r':
			b.WriteByte(' ')
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
			// dropped
		case r == '\u2028' || r == '\u2029' || r == '\u202e' || r == '\u202d' || r == '\u2066' || r == '\u2067' || r == '\u2068' || r == '\u2069':
			// line separators and bidirectional overrides can disguise what a line says
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func applyTruncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func applyPlural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// FormatDuration rounds to what a person reads: 850ms, 12.3s, 4m05s, 1h02m.
func FormatDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
}

// FormatCount groups thousands: 1,234,567.
func FormatCount(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// FormatCost shows a cost in dollars, or "-" when the agent reported none.
func FormatCost(c *float64) string {
	if c == nil {
		return "-"
	}
	return fmt.Sprintf("$%.4f", *c)
}

// applyTable writes rows as left-aligned columns separated by two spaces; the first row is the header.
func applyTable(w io.Writer, rows [][]string) {
	widths := map[int]int{}
	for _, row := range rows {
		for i, cell := range row {
			if n := utf8.RuneCountInString(cell); n > widths[i] {
				widths[i] = n
			}
		}
	}
	for _, row := range rows {
		var b strings.Builder
		for i, cell := range row {
			if i > 0 {
				b.WriteString("  ")
			}
			b.WriteString(cell)
			if i < len(row)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(cell)))
			}
		}
		fmt.Fprintln(w, b.String())
	}
}
