package views

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/kewplan/kewplan/executor"
	"github.com/kewplan/kewplan/executor/conform"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/verdict"
	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/plandiff"
	"github.com/kewplan/kewplan/planner"
	"github.com/kewplan/kewplan/runners"
)

// hostileText is hostileValue with a newline, for the fields that may be multi-line.
const hostileText = hostileValue + "\nline two"

// TestHostileStringsEscapedInViews renders every human and markdown view with hostileValue in each field a
// configuration, a plan file or an agent controls, and asserts that no byte a terminal would obey (C0 other than
// newline and tab, DEL, C1) and no bidirectional override reaches the output.
func TestHostileStringsEscapedInViews(t *testing.T) {
	h := hostileValue
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	exit1 := int64(1)
	cost := 0.5

	diff := &plandiff.Diff{
		Base: plandiff.Side{Name: h, ConfigDigest: h}, Head: plandiff.Side{Name: h, ConfigDigest: h},
		Exposure: []plandiff.Finding{{Kind: plandiff.KindCredentialAdded, Widening: true, Node: h, Credential: h, Message: h},
			{Kind: plandiff.KindCredentialAdded, Node: h, Message: h}},
		Added:   []plandiff.NodeSummary{{Name: h, Runner: h, Role: h, Image: h, Network: h, Isolation: h, Credentials: []string{h}, Argv: []string{h}}},
		Removed: []plandiff.NodeSummary{{Name: h, Runner: h}},
		Changed: []plandiff.NodeChange{{Name: h, Fields: []plandiff.FieldChange{{Field: h, Base: h, Head: h}},
			DependsOnAdded: []string{h}, DependsOnRemoved: []string{h},
			Argv: []plandiff.WordEdit{{Op: " ", Word: h}, {Op: "-", Word: h}, {Op: "+", Word: h}}}},
		DiagnosticsAdded:    []plandiff.Diagnostic{{Severity: "error", Rule: h, Summary: h, Detail: hostileText}},
		DiagnosticsResolved: []plandiff.Diagnostic{{Severity: "warning", Rule: h, Summary: h, Detail: hostileText}},
	}
	run := ledger.RunRecord{ID: h, StartedAt: t0, EndedAt: &t1, ConfigDigest: h, Status: h, KewplanVersion: h, Nodes: 1}
	node := ledger.NodeRecord{RunID: h, Node: h, Runner: h, Protocol: h, Role: h, Image: h, ImageID: h, RoutedModel: h,
		ReportedModel: h + "x", SessionID: h, ExitCode: &exit1, Status: h, Reason: hostileText, StartedAt: &t0, EndedAt: &t1,
		Argv: []string{"docker", h, "--model", h}, PromptSHA256: h, StdoutLog: h, StderrLog: h, BaseCommit: h, Commit: h + "c",
		Pushed: true, Branch: h, PullRequest: h, Verdict: h, VerdictSummary: hostileText,
		VerdictFindings: []verdict.Finding{{Path: h, Line: 3, Message: hostileText}}, SidecarSHA256: h, SidecarLocation: h}
	hist := map[string]NodeHistory{h: {ReusedFrom: h, Attempts: []AttemptJSON{
		{Attempt: 1, Status: h, StopReason: hostileText, RetryWait: h}, {Attempt: 2, Status: h, StopReason: h}}}}
	result := ledger.NodeResult{RunID: h, Node: h, Runner: h, Model: h, Status: ledger.StatusFailed, Reason: hostileText,
		Totals: runners.RunTotals{Model: h, SessionID: h, CostUSD: &cost}, Started: t0, Ended: t1}
	doc := &jsonplan.Document{Nodes: []jsonplan.NodeDocument{{Name: h, Runner: h, Role: h, DependsOn: []string{h}, Errors: true}}}
	check := conform.Check{ID: 1, Title: h, Status: conform.Fail, Evidence: []string{hostileText}}

	views := map[string]func(w *bytes.Buffer) error{
		"diff human":       func(w *bytes.Buffer) error { return writeDiffHuman(w, diff, DiffOptions{}) },
		"diff human color": func(w *bytes.Buffer) error { return writeDiffHuman(w, diff, DiffOptions{Color: true}) },
		"diff markdown":    func(w *bytes.Buffer) error { return writeDiffMarkdown(w, diff) },
		"runs list":        func(w *bytes.Buffer) error { return writeRunsHuman(w, []ledger.RunRecord{run}) },
		"runs show": func(w *bytes.Buffer) error {
			return writeRunHistoryHuman(w, &run, []ledger.NodeRecord{node}, hist)
		},
		"telemetry reported": func(w *bytes.Buffer) error {
			return writeTelemetry(w, h, runners.RunTotals{Model: h, ModelSource: runners.ModelReported, SessionID: h})
		},
		"telemetry routed": func(w *bytes.Buffer) error {
			return writeTelemetry(w, h, runners.RunTotals{Model: h, ModelSource: runners.ModelRouted, SessionID: h})
		},
		"conform": func(w *bytes.Buffer) error {
			return conformReportHuman(w, &conform.Report{Image: h, ImageID: h, Runner: h, Protocol: h, Agent: h, Rows: []conform.Check{check}}, false)
		},
		"smoke": func(w *bytes.Buffer) error {
			return smokeReportHuman(w, &conform.SmokeReport{Image: h, ImageID: h, Runner: h, Argv: []string{"docker", h}, Checks: []conform.Check{check}}, false)
		},
		"runners": func(w *bytes.Buffer) error {
			return writeRunnersHuman(w, []planner.RunnerInfo{{Name: h, Kind: h, Protocol: h, Credentials: []string{h},
				CredentialOrigins: []string{h}, Declared: h, Image: h, Endpoints: []string{h}}})
		},
		"graph": func(w *bytes.Buffer) error { return WriteGraphDOT(w, doc) },
		"apply display": func(w *bytes.Buffer) error {
			for _, live := range []bool{false, true} {
				v := newApplyDisplay(w, live, live)
				v.ApplyStart(executor.ApplyStartEvent{RunID: h, Nodes: []string{h}, Parallelism: 1, Time: t0, Warnings: []string{hostileText}})
				v.NodeStart(executor.NodeStartEvent{RunID: h, Node: h, Runner: h, Image: h, Model: h, Time: t0})
				v.NodeProgress(executor.NodeProgressEvent{RunID: h, Node: h, Totals: result.Totals, Time: t0})
				v.Warning(executor.WarningEvent{RunID: h, Node: h, Message: hostileText, Time: t0})
				v.NodeDone(result)
				v.ApplyDone(executor.ApplySummary{RunID: h, Status: ledger.RunFailed, Nodes: []ledger.NodeResult{result},
					Started: t0, Ended: t1, StateDir: h})
				v.Close()
			}
			return nil
		},
	}
	for name, render := range views {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := render(&buf); err != nil {
				t.Fatal(err)
			}
			out := buf.Bytes()
			if strings.Contains(name, "color") || name == "apply display" {
				out = stripOwnStyles(out) // the view's own colour and cursor sequences, never a value's
			}
			if c := rawControl(out); c != "" {
				t.Errorf("%s writes the raw control character %q:\n%q", name, c, buf.String())
			}
			if !bytes.Contains(out, []byte(`\x1b[2J`)) {
				t.Errorf("%s does not show the escape sequence visibly:\n%s", name, out)
			}
		})
	}
}

// stripOwnStyles removes the SGR, cursor-up and erase sequences the colour and live views write themselves.
func stripOwnStyles(out []byte) []byte {
	var b bytes.Buffer
	for i := 0; i < len(out); i++ {
		if out[i] == 0x1b && i+1 < len(out) && out[i+1] == '[' {
			j := i + 2
			for j < len(out) && (out[j] >= '0' && out[j] <= '9' || out[j] == ';') {
				j++
			}
			if j < len(out) && strings.IndexByte("mAJK", out[j]) >= 0 {
				i = j
				continue
			}
		}
		b.WriteByte(out[i])
	}
	return b.Bytes()
}

// An error that quotes a file (a plan's format_version, a configuration path) reaches the terminal escaped.
func TestErrorEscaped(t *testing.T) {
	var stderr bytes.Buffer
	v := NewView(Streams{Stdout: io.Discard, Stderr: &stderr})
	v.Error(errors.New("plan format 1.0\x1b]0;pwned\x07 is not supported\nsecond line"))
	v.UsageError(errors.New("bad \x1b[2J flag"))
	if got := stderr.String(); strings.ContainsAny(got, "\x1b\x07") || !strings.Contains(got, "\nsecond line") {
		t.Errorf("errors printed as %q", got)
	}
}
