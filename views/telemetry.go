package views

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/dustin/go-humanize"
	"github.com/kewplan/kewplan/internal/money"
	"github.com/kewplan/kewplan/internal/termsafe"

	"github.com/kewplan/kewplan/runners"
)

// writeTelemetryJSON writes the document `kewplan telemetry --json` prints: the RunTotals exactly, indented, so
// that a script reads the same keys the executor records. cost_usd is null when the agent reported no cost,
// turns when the vocabulary does not count them. Model and session id come from an untrusted stream; JSON
// escaping already makes every control character in them inert.
func writeTelemetryJSON(w io.Writer, t runners.RunTotals) error {
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// writeTelemetry writes t as a small two-column table for a person re-checking a run's bill or log: what the
// stream reported, what kewplan had to fall back on, and what it could not know.
func writeTelemetry(w io.Writer, runner string, t runners.RunTotals) error {
	model := "unknown (the stream names none and no model was routed)"
	switch t.ModelSource {
	case runners.ModelReported:
		model = termsafe.String(t.Model) + " (reported)"
	case runners.ModelRouted:
		model = termsafe.String(t.Model) + " (routed; the stream names no model)"
	}
	session := termsafe.String(t.SessionID)
	if session == "" {
		session = "-"
	}
	status := "ok"
	if t.IsError {
		status = "error"
	}
	finished := "yes"
	if !t.Finished {
		finished = "no terminal event; figures are as of the last line"
	}
	turns := "-"
	if t.Turns != nil {
		turns = humanize.Comma(*t.Turns)
	}
	cost := "unknown (the agent reported no cost)"
	if t.CostUSD != nil {
		cost = money.USD(*t.CostUSD)
	}
	rows := [][2]string{
		{"Runner", termsafe.String(runner)},
		{"Model", model},
		{"Session", session},
		{"Status", status},
		{"Finished", finished},
		{"Turns", turns},
		{"Input", humanize.Comma(t.InputTokens) + " " + plural(t.InputTokens, "token", "tokens")},
		{"Output", humanize.Comma(t.OutputTokens) + " " + plural(t.OutputTokens, "token", "tokens")},
		{"Cache read", humanize.Comma(t.CacheReadTokens) + " " + plural(t.CacheReadTokens, "token", "tokens")},
		{"Cache write", humanize.Comma(t.CacheWriteTokens) + " " + plural(t.CacheWriteTokens, "token", "tokens")},
		{"Cost", cost},
		{"Lines", humanize.Comma(t.Events) + " " + plural(t.Events, "event", "events") + ", " + humanize.Comma(t.UnparsedLines) + " unparsed, " +
			humanize.Comma(t.OversizedLines) + " oversized"},
	}
	for _, r := range rows {
		if _, err := fmt.Fprintf(w, "%-12s %s\n", r[0], r[1]); err != nil {
			return err
		}
	}
	return nil
}
