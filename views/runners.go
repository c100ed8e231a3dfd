package views

import (
	"io"
	"strings"

	"github.com/kewplan/kewplan/internal/jsonstream"
	"github.com/kewplan/kewplan/internal/termsafe"

	"github.com/kewplan/kewplan/planner"
)

// runnersJSON is `kewplan runners --json`.
type runnersJSON struct {
	Runners []planner.RunnerInfo `json:"runners"`
}

// writeRunnersJSON writes the runners as indented JSON.
func writeRunnersJSON(w io.Writer, list []planner.RunnerInfo) error {
	if list == nil {
		list = []planner.RunnerInfo{}
	}
	return jsonstream.Indented(w, runnersJSON{Runners: list})
}

// writeRunnersHuman writes a table: name, protocol, where the runner comes from, its image, its model endpoints,
// and its credentials with their origins.
func writeRunnersHuman(w io.Writer, list []planner.RunnerInfo) error {
	pw := &planWriter{w: w}
	rows := [][]string{{"RUNNER", "PROTOCOL", "ORIGIN", "IMAGE", "ENDPOINTS", "CREDENTIALS"}}
	for _, r := range list {
		origin := r.Kind
		if r.Declared != "" {
			origin += " " + r.Declared
		}
		image := r.Image
		if image == "" {
			image = "(none)"
		}
		creds := "(none: refused in a container)"
		if len(r.Credentials) > 0 {
			parts := make([]string, len(r.Credentials))
			for i, c := range r.Credentials {
				parts[i] = c
				if i < len(r.CredentialOrigins) && r.CredentialOrigins[i] != planner.OriginBuiltin {
					parts[i] += " (" + r.CredentialOrigins[i] + ")"
				}
			}
			creds = strings.Join(parts, ", ")
		}
		endpoints := "(none)"
		if len(r.Endpoints) > 0 {
			endpoints = strings.Join(r.Endpoints, ",")
		}
		rows = append(rows, []string{r.Name, r.Protocol, origin, image, endpoints, creds})
	}
	writeRunnersTable(pw, rows)
	return pw.err
}

// writeRunnersTable aligns columns with two spaces between them; the last column is not padded.
func writeRunnersTable(pw *planWriter, rows [][]string) {
	if len(rows) == 0 {
		return
	}
	widths := make([]int, len(rows[0]))
	for _, row := range rows {
		for i := range row {
			row[i] = termsafe.String(row[i])
		}
	}
	for _, row := range rows {
		for i, cell := range row {
			widths[i] = max(widths[i], len(cell))
		}
	}
	for _, row := range rows {
		var b strings.Builder
		for i, cell := range row {
			if i == len(row)-1 {
				b.WriteString(cell)
				break
			}
			b.WriteString(cell)
			b.WriteString(strings.Repeat(" ", widths[i]-len(cell)+2))
		}
		pw.printf("%s\n", b.String())
	}
}
