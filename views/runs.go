package views

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/kewplan/kewplan/internal/jsonstream"
	"github.com/kewplan/kewplan/internal/termsafe"

	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/verdict"
)

// runsJSON is the document of `kewplan runs --json`.
type runsJSON struct {
	Runs []ledger.RunRecord `json:"runs"`
}

// runJSON is the document of `kewplan runs show RUN --json`.
type runJSON struct {
	Run   ledger.RunRecord `json:"run"`
	Nodes []runNodeJSON    `json:"nodes"`
	// EgressDenials are the requests the egress proxy refused during the run, in order; empty when none was.
	EgressDenials []egressDenialJSON `json:"egress_denials"`
	// Meters are both meters of every brokered attempt (the agent's stream and the proxy's), with their finding;
	// absent when no node was brokered.
	Meters []ledger.NodeMeters `json:"meters,omitempty"`
}

// runNodeJSON is one node of `runs show --json`: its final record, every attempt, and the run it was reused
// from.
type runNodeJSON struct {
	ledger.NodeRecord
	// Attempts has one entry per attempt, oldest first; empty for a node that never started or was reused.
	Attempts []AttemptJSON `json:"attempts"`
	// ReusedFrom is the run whose outputs a resumed run reused for this node; absent when the node ran.
	ReusedFrom string `json:"reused_from,omitempty"`
}

// NodeHistory is what `runs show` tells about a node beyond its final record. It is a view model: the ledger's
// attempt rows are mapped to it by the caller, so this package does not follow the ledger's schema.
type NodeHistory struct {
	Attempts   []AttemptJSON
	ReusedFrom string
}

// AttemptJSON is one attempt of a node.
type AttemptJSON struct {
	Attempt  int    `json:"attempt"` // 1-based
	Status   string `json:"status"`
	ExitCode *int64 `json:"exit_code"`
	// StopReason says why the attempt ended when it did not succeed, e.g. "api_error: HTTP 529 overloaded",
	// "timeout", "engine_error: create container: …", or the agent's own failure.
	StopReason string `json:"stop_reason"`
	// RetryWait is the wait before the next attempt, in Go duration form ("10.4s"); "" when none followed.
	RetryWait        string     `json:"retry_wait,omitempty"`
	StartedAt        *time.Time `json:"started_at"`
	EndedAt          *time.Time `json:"ended_at"`
	InputTokens      int64      `json:"input_tokens"`
	OutputTokens     int64      `json:"output_tokens"`
	CacheReadTokens  int64      `json:"cache_read_tokens"`
	CacheWriteTokens int64      `json:"cache_write_tokens"`
	CostUSD          *float64   `json:"cost_usd"`
	StdoutLog        string     `json:"stdout_log"`
	StderrLog        string     `json:"stderr_log"`
}

// attemptFromRecord is the single attempt of a node recorded before attempts were (or by a run that made one):
// the node record itself. A node that never started has none.
func attemptFromRecord(n ledger.NodeRecord) []AttemptJSON {
	if n.StartedAt == nil {
		return []AttemptJSON{}
	}
	a := AttemptJSON{Attempt: 1, Status: n.Status, ExitCode: n.ExitCode, StartedAt: n.StartedAt, EndedAt: n.EndedAt,
		InputTokens: n.InputTokens, OutputTokens: n.OutputTokens, CacheReadTokens: n.CacheReadTokens,
		CacheWriteTokens: n.CacheWriteTokens, CostUSD: n.CostUSD, StdoutLog: n.StdoutLog, StderrLog: n.StderrLog}
	if !succeededStatus(n.Status) {
		a.StopReason = n.Reason
	}
	return []AttemptJSON{a}
}

func succeededStatus(s string) bool {
	return s == ledger.StatusSucceeded || s == ledger.StatusApproved
}

// runNodes joins the records with their history; a node without history gets attemptFromRecord.
func runNodes(nodes []ledger.NodeRecord, hist map[string]NodeHistory) []runNodeJSON {
	out := make([]runNodeJSON, len(nodes))
	for i, n := range nodes {
		h, ok := hist[n.Node]
		out[i] = runNodeJSON{NodeRecord: n, ReusedFrom: termsafe.Flatten(h.ReusedFrom)}
		switch {
		case ok && h.Attempts != nil:
			out[i].Attempts = make([]AttemptJSON, len(h.Attempts))
			for k, a := range h.Attempts {
				a.StopReason = termsafe.Flatten(a.StopReason)
				out[i].Attempts[k] = a
			}
		case h.ReusedFrom != "":
			out[i].Attempts = []AttemptJSON{}
		default:
			out[i].Attempts = attemptFromRecord(n)
			for k := range out[i].Attempts {
				out[i].Attempts[k].StopReason = termsafe.Flatten(out[i].Attempts[k].StopReason)
			}
		}
	}
	return out
}

// writeRunsJSON writes the runs as one indented JSON document.
func writeRunsJSON(w io.Writer, runs []ledger.RunRecord) error {
	clean := make([]ledger.RunRecord, len(runs))
	for i, r := range runs {
		clean[i] = runRecordJSON(r)
	}
	return jsonstream.Indented(w, runsJSON{Runs: clean})
}

// runRecordJSON gives a run's cost lists as arrays, never null.
func runRecordJSON(r ledger.RunRecord) ledger.RunRecord {
	r.CostEstimated, r.CostUnknown = applyStrings(r.CostEstimated), applyStrings(r.CostUnknown)
	return r
}

// writeRunJSON writes one run and its nodes as one indented JSON document. Agent-derived strings are sanitised.
func writeRunJSON(w io.Writer, run *ledger.RunRecord, nodes []ledger.NodeRecord) error {
	return writeRunHistoryJSON(w, run, nodes, nil)
}

// writeRunHistoryJSON is writeRunJSON with each node's attempts and reuse (hist by node name; a node without an
// entry shows its record as its one attempt).
func writeRunHistoryJSON(w io.Writer, run *ledger.RunRecord, nodes []ledger.NodeRecord, hist map[string]NodeHistory) error {
	return writeRunEgressJSON(w, run, nodes, hist, nil)
}

// writeRunEgressJSON is writeRunHistoryJSON with the run's refused egress requests.
func writeRunEgressJSON(w io.Writer, run *ledger.RunRecord, nodes []ledger.NodeRecord, hist map[string]NodeHistory, denials []ledger.EgressDenial) error {
	return writeRunMeteredJSON(w, run, nodes, hist, denials, nil)
}

// writeRunMeteredJSON is writeRunEgressJSON with both meters of the brokered attempts.
func writeRunMeteredJSON(w io.Writer, run *ledger.RunRecord, nodes []ledger.NodeRecord, hist map[string]NodeHistory, denials []ledger.EgressDenial, meters []ledger.NodeMeters) error {
	clean := make([]ledger.NodeRecord, len(nodes))
	for i, n := range nodes {
		clean[i] = sanitizeNode(n)
		if clean[i].Argv == nil {
			clean[i].Argv = []string{}
		}
		if clean[i].VerdictFindings == nil {
			clean[i].VerdictFindings = []verdict.Finding{}
		}
	}
	clearMeters := make([]ledger.NodeMeters, len(meters))
	for i, m := range meters {
		m.Model = termsafe.Flatten(m.Model) // the provider's text, through an answer the agent asked for
		clearMeters[i] = m
	}
	return jsonstream.Indented(w, runJSON{Run: runRecordJSON(*run), Nodes: runNodes(clean, hist), EgressDenials: egressDenialsJSON(denials), Meters: clearMeters})
}

// sanitizeNode cleans every field of a node row that an agent could have influenced.
func sanitizeNode(n ledger.NodeRecord) ledger.NodeRecord {
	n.ReportedModel = termsafe.Flatten(n.ReportedModel)
	n.SessionID = termsafe.Flatten(n.SessionID)
	n.Reason = termsafe.Flatten(n.Reason)
	n.VerdictSummary = termsafe.Flatten(n.VerdictSummary)
	n.Commit = termsafe.Flatten(n.Commit)
	n.Branch = termsafe.Flatten(n.Branch)
	n.PullRequest = termsafe.Flatten(n.PullRequest)
	n.SidecarLocation = termsafe.Flatten(n.SidecarLocation)
	n.Salvage = sanitizeSalvage(n.Salvage)
	findings := make([]verdict.Finding, len(n.VerdictFindings))
	for i, f := range n.VerdictFindings {
		findings[i] = verdict.Finding{Path: termsafe.Flatten(f.Path), Line: f.Line, Message: termsafe.Flatten(f.Message)}
	}
	if n.VerdictFindings != nil {
		n.VerdictFindings = findings
	}
	return n
}

// escapeNode escapes, visibly (termsafe.String), every field of a node row a configuration or an agent could
// have influenced, for the human view (the JSON view keeps sanitizeNode).
func escapeNode(n ledger.NodeRecord) ledger.NodeRecord {
	for _, f := range []*string{&n.Node, &n.Status, &n.Runner, &n.Role, &n.Image, &n.ImageID, &n.RoutedModel,
		&n.ReportedModel, &n.SessionID, &n.Reason, &n.Verdict, &n.VerdictSummary, &n.BaseCommit, &n.Commit, &n.Branch,
		&n.PullRequest, &n.SidecarLocation, &n.SidecarSHA256, &n.PromptSHA256, &n.StdoutLog, &n.StderrLog} {
		*f = termsafe.String(*f)
	}
	findings := make([]verdict.Finding, len(n.VerdictFindings))
	for i, f := range n.VerdictFindings {
		findings[i] = verdict.Finding{Path: termsafe.String(f.Path), Line: f.Line, Message: termsafe.String(f.Message)}
	}
	n.VerdictFindings = findings
	return n
}

// runProcess names the apply process a run recorded: "kewplan pid 4242 on build-7".
func runProcess(run *ledger.RunRecord) string {
	if run.Host == "" {
		return fmt.Sprintf("kewplan pid %d", run.PID)
	}
	return fmt.Sprintf("kewplan pid %d on %s", run.PID, termsafe.String(run.Host))
}

// writeRunsHuman lists runs, newest first, as a table.
func writeRunsHuman(w io.Writer, runs []ledger.RunRecord) error {
	if len(runs) == 0 {
		_, err := fmt.Fprintln(w, "No runs recorded yet. Run kewplan apply first.")
		return err
	}
	rows := [][]string{{"RUN", "STARTED", "STATUS", "NODES", "DURATION", "TOKENS IN", "TOKENS OUT", "COST"}}
	for _, r := range runs {
		dur := "-"
		if r.EndedAt != nil {
			dur = formatDuration(r.EndedAt.Sub(r.StartedAt))
		}
		status := r.Status
		if r.Status == ledger.RunInterrupted && r.EndedAt != nil {
			status += " since " + r.EndedAt.UTC().Format("2006-01-02 15:04:05Z")
		}
		rows = append(rows, []string{r.ID, r.StartedAt.UTC().Format("2006-01-02 15:04:05Z"), status,
			fmt.Sprintf("%d/%d", r.Succeeded, r.Nodes), dur, humanize.Comma(r.InputTokens), humanize.Comma(r.OutputTokens), formatCostSource(r.CostUSD, r.CostSource)})
	}
	applyTable(w, rows)
	return nil
}

// writeRunHuman shows one run: a header, then each node with its telemetry, outcome, verdict and logs.
func writeRunHuman(w io.Writer, run *ledger.RunRecord, nodes []ledger.NodeRecord) error {
	return writeRunHistoryHuman(w, run, nodes, nil)
}

// writeRunHistoryHuman is writeRunHuman with each node's reuse and, when it took more than one, its attempts.
func writeRunHistoryHuman(w io.Writer, run *ledger.RunRecord, nodes []ledger.NodeRecord, hist map[string]NodeHistory) error {
	return writeRunEgressHuman(w, run, nodes, hist, nil)
}

// writeRunEgressHuman is writeRunHistoryHuman with a section listing the run's refused egress requests.
func writeRunEgressHuman(w io.Writer, run *ledger.RunRecord, nodes []ledger.NodeRecord, hist map[string]NodeHistory, denials []ledger.EgressDenial) error {
	joined := runNodes(nodes, hist)
	var b strings.Builder
	fmt.Fprintf(&b, "Run %s: %s\n", run.ID, run.Status)
	fmt.Fprintf(&b, "  started        %s\n", run.StartedAt.UTC().Format(time.RFC3339))
	switch {
	case run.EndedAt != nil && run.Status == ledger.RunInterrupted:
		// Its apply died: the end is the last thing recorded of it, which is when it was last known alive.
		fmt.Fprintf(&b, "  interrupted    since %s (%s after its start; last recorded of %s)\n", run.EndedAt.UTC().Format(time.RFC3339),
			formatDuration(run.EndedAt.Sub(run.StartedAt)), runProcess(run))
	case run.EndedAt != nil:
		fmt.Fprintf(&b, "  ended          %s (%s)\n", run.EndedAt.UTC().Format(time.RFC3339), formatDuration(run.EndedAt.Sub(run.StartedAt)))
	}
	if run.ConfigDigest != "" {
		fmt.Fprintf(&b, "  config digest  %s\n", run.ConfigDigest)
	}
	if run.KewplanVersion != "" {
		fmt.Fprintf(&b, "  kewplan        %s\n", run.KewplanVersion)
	}
	for i, raw := range nodes {
		n := escapeNode(raw)
		fmt.Fprintf(&b, "\nnode %q: %s\n", n.Node, n.Status)
		field := func(name, value string) {
			if value != "" {
				fmt.Fprintf(&b, "  %-15s%s\n", name, value)
			}
		}
		field("reused from", joined[i].ReusedFrom)
		field("reason", n.Reason)
		writeAttemptsHuman(&b, joined[i].Attempts)
		runner := n.Runner
		if n.Role != "" {
			runner += " (" + n.Role + ")"
		}
		field("runner", strings.TrimSpace(runner))
		field("image", n.Image)
		field("image id", n.ImageID)
		model := n.RoutedModel
		if n.ReportedModel != "" && n.ReportedModel != n.RoutedModel {
			model += " (reported " + n.ReportedModel + ")"
		}
		field("model", model)
		field("session", n.SessionID)
		if n.StartedAt != nil {
			field("duration", formatDuration(n.Duration()))
		}
		if n.ExitCode != nil {
			field("exit code", fmt.Sprint(*n.ExitCode))
		}
		if n.StartedAt != nil {
			field("tokens", fmt.Sprintf("%s input, %s output, %s cache read, %s cache write",
				humanize.Comma(n.InputTokens), humanize.Comma(n.OutputTokens), humanize.Comma(n.CacheReadTokens), humanize.Comma(n.CacheWriteTokens)))
			field("cost", runNodeCost(n.CostUSD, n.CostSource))
			field("stream", fmt.Sprintf("%d events, %d unparsed lines, %d oversized lines", n.Events, n.UnparsedLines, n.OversizedLines))
		}
		if bs := n.Budget; bs != nil {
			scope := "the node's own cap"
			if bs.Scope == "apply" {
				scope = "the apply-wide cap"
			}
			field("budget", fmt.Sprintf("%s (%s)", bs.Message, scope))
		}
		field("budget warning", n.BudgetWarning)
		field("base commit", n.BaseCommit)
		if n.Commit != "" && n.Commit != n.BaseCommit {
			field("commit", n.Commit)
		}
		if n.Pushed {
			field("pushed to", n.Branch)
		}
		field("pull request", n.PullRequest)
		writeSalvageHuman(field, raw.Salvage)
		if n.Verdict != "" {
			field("verdict", n.Verdict)
			field("summary", n.VerdictSummary)
			for _, f := range n.VerdictFindings {
				loc := f.Path
				if f.Line > 0 {
					loc = fmt.Sprintf("%s:%d", f.Path, f.Line)
				}
				field("finding", strings.TrimPrefix(loc+": "+f.Message, ": "))
			}
			field("sidecar", strings.TrimSpace(n.SidecarLocation+" sha256:"+n.SidecarSHA256))
		}
		field("prompt sha256", n.PromptSHA256)
		field("stdout log", n.StdoutLog)
		field("stderr log", n.StderrLog)
		if len(n.Argv) > 0 {
			b.WriteString("  argv\n")
			lines := argvLines(n.Argv)
			for i, line := range lines {
				if i < len(lines)-1 {
					line += " \\"
				}
				indent := "    "
				if i > 0 {
					indent = "      "
				}
				b.WriteString(indent + termsafe.String(line) + "\n")
			}
		}
	}
	writeEgressDenialsHuman(&b, denials)
	fmt.Fprintf(&b, "\nTotals: %d of %d nodes succeeded; %s input, %s output, %s cache read, %s cache write tokens; cost %s.\n",
		run.Succeeded, run.Nodes, humanize.Comma(run.InputTokens), humanize.Comma(run.OutputTokens), humanize.Comma(run.CacheReadTokens),
		humanize.Comma(run.CacheWriteTokens), formatCostTotal(run.CostUSD, run.CostSource, run.CostEstimated, run.CostUnknown))
	// Every agent-derived field is escaped above; the last pass (termsafe.Text) guards any that is not.
	_, err := io.WriteString(w, termsafe.Text(b.String()))
	return err
}

// runNodeCost is a node's cost in `runs show`, saying where it came from.
func runNodeCost(c *float64, source string) string {
	switch source {
	case ledger.CostReported:
		return formatCost(c) + " (reported by the agent)"
	case ledger.CostProvider:
		return formatCost(c) + " (reported by the provider, read by kewplan's proxy)"
	case "estimated":
		return formatCost(c) + " (estimated: tokens × price)"
	case "unknown":
		return "unknown (no usage reported, or no price for its model)"
	}
	return formatCost(c)
}

// writeAttemptsHuman lists a node's attempts when there was more than one (a single attempt is the node's own
// record, shown around it).
func writeAttemptsHuman(b *strings.Builder, attempts []AttemptJSON) {
	if len(attempts) < 2 {
		return
	}
	fmt.Fprintf(b, "  attempts\n")
	rows := [][]string{{"#", "STATUS", "EXIT", "STARTED", "DURATION", "TOKENS IN", "TOKENS OUT", "COST", "WHY IT STOPPED"}}
	for _, a := range attempts {
		exit, started, dur := "-", "-", "-"
		if a.ExitCode != nil {
			exit = fmt.Sprint(*a.ExitCode)
		}
		if a.StartedAt != nil {
			started = a.StartedAt.UTC().Format("15:04:05Z")
			if a.EndedAt != nil {
				dur = formatDuration(a.EndedAt.Sub(*a.StartedAt))
			}
		}
		why := a.StopReason
		if a.RetryWait != "" {
			why = strings.TrimPrefix(why+"; retried after "+a.RetryWait, "; ")
		}
		rows = append(rows, []string{fmt.Sprint(a.Attempt), a.Status, exit, started, dur, humanize.Comma(a.InputTokens),
			humanize.Comma(a.OutputTokens), formatCost(a.CostUSD), why})
	}
	var t strings.Builder
	applyTable(&t, rows)
	for _, line := range strings.Split(strings.TrimRight(t.String(), "\n"), "\n") {
		fmt.Fprintf(b, "    %s\n", line)
	}
}
