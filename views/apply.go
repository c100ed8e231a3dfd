package views

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kewplan/kewplan/internal/money"
	"github.com/kewplan/kewplan/internal/termsafe"

	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/runners"
)

// applyTotalsJSON is a node's telemetry in the NDJSON events and in `runs --json`.
func applyTotalsJSON(t runners.RunTotals) map[string]any {
	return map[string]any{
		"reported_model": termsafe.Flatten(t.Model), "model_source": t.ModelSource, "session_id": termsafe.Flatten(t.SessionID),
		"input_tokens": t.InputTokens, "output_tokens": t.OutputTokens, "cache_read_tokens": t.CacheReadTokens,
		"cache_write_tokens": t.CacheWriteTokens, "cost_usd": t.CostUSD, "events": t.Events,
		"unparsed_lines": t.UnparsedLines, "oversized_lines": t.OversizedLines,
	}
}

func applyNodeJSON(r *ledger.NodeResult) map[string]any {
	obj := applyTotalsJSON(r.Totals)
	obj["run_id"], obj["node"], obj["runner"], obj["role"] = r.RunID, r.Node, r.Runner, r.Role
	obj["image"], obj["image_id"], obj["routed_model"] = r.Image, r.ImageID, r.Model
	obj["status"], obj["reason"], obj["exit_code"] = r.Status, termsafe.Flatten(r.Reason), r.ExitCode
	obj["duration_ms"] = r.Duration().Milliseconds()
	obj["argv"] = applyStrings(r.Argv)
	obj["prompt_sha256"] = r.PromptSHA256
	obj["stdout_log"], obj["stderr_log"] = r.StdoutLog, r.StderrLog
	obj["commit"], obj["branch"], obj["pushed"], obj["pull_request"] = r.Commit, r.Branch, r.Pushed, r.PullRequest
	if r.Verdict != nil {
		obj["verdict"] = r.Verdict.Verdict
		obj["verdict_summary"] = termsafe.Flatten(r.Verdict.Summary)
	}
	if c, src := r.RecordedCost(); src != "" {
		obj["cost_usd"], obj["cost_source"] = c, src
	}
	if r.Budget != nil {
		obj["budget"] = r.Budget
	}
	if r.BudgetWarning != "" {
		obj["budget_warning"] = r.BudgetWarning
	}
	if r.Attempts > 1 {
		obj["attempts"] = r.Attempts
	}
	if r.ReusedFrom != "" {
		obj["reused_from"] = r.ReusedFrom
	}
	return obj
}

func applyStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func applyTruncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// formatDuration is a run's or a node's duration for people (formatElapsed), "-" when there is none (zero or
// less: not started, not ended).
func formatDuration(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return formatElapsed(d)
}

// formatElapsed rounds a duration to what a person reads: 850ms, 12.3s, 4m05s, 1h02m; under a second (zero and
// less included) in milliseconds. Every human view formats durations here.
func formatElapsed(d time.Duration) string {
	switch {
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
}

// formatCost shows a cost in dollars, or "-" when the agent reported none.
func formatCost(c *float64) string {
	if c == nil {
		return "-"
	}
	return money.USD(*c)
}

// formatCostSource shows a node's cost with where it came from: "$0.0421" (the agent's own figure, or a row
// without a source), "$1.20 est." (tokens × price), "unknown" (never 0), or for a run's total that includes an
// unknown cost, "at least $1.20".
func formatCostSource(c *float64, source string) string {
	switch {
	case source == ledger.CostUnknown && c == nil:
		return "unknown"
	case source == ledger.CostUnknown:
		return "at least " + formatCost(c)
	case source == ledger.CostEstimated:
		return formatCost(c) + " est."
	}
	return formatCost(c)
}

// formatCostTotal shows a total cost and says when it includes estimates or unknown costs, naming the nodes:
// "$1.62 (estimated for fix)", "at least $0.25 (unknown for review; estimated for fix)".
func formatCostTotal(c *float64, source string, estimated, unknown []string) string {
	var why []string
	if len(unknown) > 0 {
		why = append(why, "unknown for "+strings.Join(unknown, ", "))
	}
	if len(estimated) > 0 {
		why = append(why, "estimated for "+strings.Join(estimated, ", "))
	}
	s := formatCostSource(c, source)
	if source == ledger.CostEstimated {
		s = formatCost(c)
	}
	if len(why) > 0 {
		s += " (" + strings.Join(why, "; ") + ")"
	}
	return s
}

// applyTable writes rows as left-aligned columns separated by two spaces; the first row is the header.
func applyTable(w io.Writer, rows [][]string) {
	widths := map[int]int{}
	for _, row := range rows {
		for i := range row {
			row[i] = termsafe.String(row[i]) // a cell may be an agent's words (a stop reason)
		}
	}
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
