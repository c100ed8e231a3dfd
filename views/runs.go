package views

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/verdict"
)

// RunsJSON is the document of `kewplan runs --json`.
type RunsJSON struct {
	Runs []ledger.RunRecord `json:"runs"`
}

// RunJSON is the document of `kewplan runs show RUN --json`.
type RunJSON struct {
	Run   ledger.RunRecord    `json:"run"`
	Nodes []ledger.NodeRecord `json:"nodes"`
}

// WriteRunsJSON writes the runs as one indented JSON document.
func WriteRunsJSON(w io.Writer, runs []ledger.RunRecord) error {
	if runs == nil {
		runs = []ledger.RunRecord{}
	}
	return writeRunsJSONDoc(w, RunsJSON{Runs: runs})
}

// WriteRunJSON writes one run and its nodes as one indented JSON document. Agent-derived strings are sanitised.
func WriteRunJSON(w io.Writer, run *ledger.RunRecord, nodes []ledger.NodeRecord) error {
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
	return writeRunsJSONDoc(w, RunJSON{Run: *run, Nodes: clean})
}

func writeRunsJSONDoc(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// sanitizeNode cleans every field of a node row that an agent could have influenced.
func sanitizeNode(n ledger.NodeRecord) ledger.NodeRecord {
	n.ReportedModel = Sanitize(n.ReportedModel)
	n.SessionID = Sanitize(n.SessionID)
	n.Reason = Sanitize(n.Reason)
	n.VerdictSummary = Sanitize(n.VerdictSummary)
	n.Commit = Sanitize(n.Commit)
	n.Branch = Sanitize(n.Branch)
	n.PullRequest = Sanitize(n.PullRequest)
	n.SidecarLocation = Sanitize(n.SidecarLocation)
	findings := make([]verdict.Finding, len(n.VerdictFindings))
	for i, f := range n.VerdictFindings {
		findings[i] = verdict.Finding{Path: Sanitize(f.Path), Line: f.Line, Message: Sanitize(f.Message)}
	}
	if n.VerdictFindings != nil {
		n.VerdictFindings = findings
	}
	return n
}

// WriteRunsHuman lists runs, newest first, as a table.
func WriteRunsHuman(w io.Writer, runs []ledger.RunRecord) error {
	if len(runs) == 0 {
		_, err := fmt.Fprintln(w, "No runs recorded yet. Run kewplan apply first.")
		return err
	}
	rows := [][]string{{"RUN", "STARTED", "STATUS", "NODES", "DURATION", "TOKENS IN", "TOKENS OUT", "COST"}}
	for _, r := range runs {
		dur := "-"
		if r.EndedAt != nil {
			dur = FormatDuration(r.EndedAt.Sub(r.StartedAt))
		}
		rows = append(rows, []string{r.ID, r.StartedAt.UTC().Format("2006-01-02 15:04:05Z"), r.Status,
			fmt.Sprintf("%d/%d", r.Succeeded, r.Nodes), dur, FormatCount(r.InputTokens), FormatCount(r.OutputTokens), FormatCost(r.CostUSD)})
	}
	applyTable(w, rows)
	return nil
}

// WriteRunHuman shows one run: a header, then each node with its telemetry, outcome, verdict and logs.
func WriteRunHuman(w io.Writer, run *ledger.RunRecord, nodes []ledger.NodeRecord) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Run %s: %s\n", run.ID, run.Status)
	fmt.Fprintf(&b, "  started        %s\n", run.StartedAt.UTC().Format(time.RFC3339))
	if run.EndedAt != nil {
		fmt.Fprintf(&b, "  ended          %s (%s)\n", run.EndedAt.UTC().Format(time.RFC3339), FormatDuration(run.EndedAt.Sub(run.StartedAt)))
	}
	if run.ConfigDigest != "" {
		fmt.Fprintf(&b, "  config digest  %s\n", run.ConfigDigest)
	}
	if run.KewplanVersion != "" {
		fmt.Fprintf(&b, "  kewplan        %s\n", run.KewplanVersion)
	}
	for _, raw := range nodes {
		n := sanitizeNode(raw)
		fmt.Fprintf(&b, "\nnode %q: %s\n", n.Node, n.Status)
		field := func(name, value string) {
			if value != "" {
				fmt.Fprintf(&b, "  %-15s%s\n", name, value)
			}
		}
		field("reason", n.Reason)
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
			field("duration", FormatDuration(n.Duration()))
		}
		if n.ExitCode != nil {
			field("exit code", fmt.Sprint(*n.ExitCode))
		}
		if n.StartedAt != nil {
			field("tokens", fmt.Sprintf("%s input, %s output, %s cache read, %s cache write",
				FormatCount(n.InputTokens), FormatCount(n.OutputTokens), FormatCount(n.CacheReadTokens), FormatCount(n.CacheWriteTokens)))
			field("cost", FormatCost(n.CostUSD))
			field("stream", fmt.Sprintf("%d events, %d unparsed lines, %d oversized lines", n.Events, n.UnparsedLines, n.OversizedLines))
		}
		field("base commit", n.BaseCommit)
		if n.Commit != "" && n.Commit != n.BaseCommit {
			field("commit", n.Commit)
		}
		if n.Pushed {
			field("pushed to", n.Branch)
		}
		field("pull request", n.PullRequest)
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
			lines := ArgvLines(n.Argv)
			for i, line := range lines {
				if i < len(lines)-1 {
					line += " \\"
				}
				indent := "    "
				if i > 0 {
					indent = "      "
				}
				b.WriteString(indent + line + "\n")
			}
		}
	}
	fmt.Fprintf(&b, "\nTotals: %d of %d nodes succeeded; %s input, %s output, %s cache read, %s cache write tokens; cost %s.\n",
		run.Succeeded, run.Nodes, FormatCount(run.InputTokens), FormatCount(run.OutputTokens), FormatCount(run.CacheReadTokens),
		FormatCount(run.CacheWriteTokens), FormatCost(run.CostUSD))
	_, err := io.WriteString(w, b.String())
	return err
}
