package views

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/kewplan/kewplan/internal/jsonstream"
	"github.com/kewplan/kewplan/internal/termsafe"

	"github.com/kewplan/kewplan/executor/conform"
)

// conformFormatVersion is the version of the JSON shape of `kewplan conform --json` and `kewplan smoke --json`.
const conformFormatVersion = "1.0"

// conformCheckJSON is one conform row or smoke element.
type conformCheckJSON struct {
	ID       int      `json:"id"`
	Title    string   `json:"title"`
	Status   string   `json:"status"` // PASS, FAIL or NOT VERIFIABLE
	Evidence []string `json:"evidence"`
}

// conformCountsJSON counts the verdicts.
type conformCountsJSON struct {
	Pass          int `json:"pass"`
	Fail          int `json:"fail"`
	NotVerifiable int `json:"not_verifiable"`
}

// conformJSON is the JSON document of `kewplan conform --json`.
type conformJSON struct {
	FormatVersion string             `json:"format_version"`
	Image         string             `json:"image"`
	ImageID       string             `json:"image_id"`
	Runner        string             `json:"runner"`
	Protocol      string             `json:"protocol"`
	Agent         string             `json:"agent"`
	Passed        bool               `json:"passed"`
	Counts        conformCountsJSON  `json:"counts"`
	Rows          []conformCheckJSON `json:"rows"`
}

// smokeJSON is the JSON document of `kewplan smoke --json`.
type smokeJSON struct {
	FormatVersion string             `json:"format_version"`
	Image         string             `json:"image"`
	ImageID       string             `json:"image_id"`
	Runner        string             `json:"runner"`
	Argv          []string           `json:"argv"`
	Passed        bool               `json:"passed"`
	Counts        conformCountsJSON  `json:"counts"`
	Checks        []conformCheckJSON `json:"checks"`
}

func conformChecksJSON(checks []conform.Check) ([]conformCheckJSON, conformCountsJSON) {
	out := make([]conformCheckJSON, 0, len(checks))
	var n conformCountsJSON
	for _, c := range checks {
		ev := c.Evidence
		if ev == nil {
			ev = []string{}
		}
		out = append(out, conformCheckJSON{ID: c.ID, Title: c.Title, Status: string(c.Status), Evidence: ev})
		switch c.Status {
		case conform.Pass:
			n.Pass++
		case conform.Fail:
			n.Fail++
		default:
			n.NotVerifiable++
		}
	}
	return out, n
}

// newConformJSON builds the JSON model of a conform report; the human view renders the same model.
func newConformJSON(r *conform.Report) conformJSON {
	rows, n := conformChecksJSON(r.Rows)
	return conformJSON{FormatVersion: conformFormatVersion, Image: r.Image, ImageID: r.ImageID, Runner: r.Runner,
		Protocol: r.Protocol, Agent: r.Agent, Passed: r.Passed, Counts: n, Rows: rows}
}

// newSmokeJSON builds the JSON model of a smoke report.
func newSmokeJSON(r *conform.SmokeReport) smokeJSON {
	checks, n := conformChecksJSON(r.Checks)
	argv := r.Argv
	if argv == nil {
		argv = []string{}
	}
	return smokeJSON{FormatVersion: conformFormatVersion, Image: r.Image, ImageID: r.ImageID, Runner: r.Runner,
		Argv: argv, Passed: r.Passed, Counts: n, Checks: checks}
}

// conformReportJSON writes the report as one indented JSON document.
func conformReportJSON(w io.Writer, r *conform.Report) error {
	return jsonstream.Indented(w, newConformJSON(r))
}

// smokeReportJSON writes the report as one indented JSON document.
func smokeReportJSON(w io.Writer, r *conform.SmokeReport) error {
	return jsonstream.Indented(w, newSmokeJSON(r))
}

// conformReportHuman writes the checklist for people: one block per row, the verdict first, the evidence
// indented under it, and a one-line result.
func conformReportHuman(w io.Writer, r *conform.Report, color bool) error {
	m := newConformJSON(r)
	s := conformStyle{color: color}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\n", s.bold("Conformance of"), termsafe.String(m.Image))
	fmt.Fprintf(&b, "  image %s · runner %s · vocabulary %s · probe stands in for %s\n\n",
		conformShortID(m.ImageID), termsafe.String(m.Runner), termsafe.String(m.Protocol), termsafe.String(m.Agent))
	conformWriteChecks(&b, m.Rows, s)
	b.WriteString("\n")
	b.WriteString(conformResultLine(m.Passed, m.Counts, len(m.Rows), "row", s))
	_, err := io.WriteString(w, b.String())
	return err
}

// smokeReportHuman writes a smoke report for people.
func smokeReportHuman(w io.Writer, r *conform.SmokeReport, color bool) error {
	m := newSmokeJSON(r)
	s := conformStyle{color: color}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\n", s.bold("Smoke test of"), termsafe.String(m.Image))
	fmt.Fprintf(&b, "  image %s · runner %s · the agent is not started\n", conformShortID(m.ImageID), termsafe.String(m.Runner))
	if len(m.Argv) > 0 {
		words := make([]string, len(m.Argv))
		for i, a := range m.Argv {
			words[i] = conformShellWord(a)
		}
		fmt.Fprintf(&b, "  ran: %s\n", strings.Join(words, " "))
	}
	b.WriteString("\n")
	conformWriteChecks(&b, m.Checks, s)
	b.WriteString("\n")
	b.WriteString(conformResultLine(m.Passed, m.Counts, len(m.Checks), "element", s))
	_, err := io.WriteString(w, b.String())
	return err
}

// conformWrapWidth is where evidence wraps.
const conformWrapWidth = 100

func conformWriteChecks(b *strings.Builder, checks []conformCheckJSON, s conformStyle) {
	const indent = "                     " // under the title: "  N  " + 16-wide verdict
	for _, c := range checks {
		fmt.Fprintf(b, "  %d  %s %s\n", c.ID, s.status(c.Status), termsafe.String(c.Title))
		for _, e := range c.Evidence {
			for i, line := range conformWrap(termsafe.String(e), conformWrapWidth-len(indent)-2) {
				if i == 0 {
					fmt.Fprintf(b, "%s- %s\n", indent, line)
				} else {
					fmt.Fprintf(b, "%s  %s\n", indent, line)
				}
			}
		}
	}
}

func conformResultLine(passed bool, n conformCountsJSON, total int, noun string, s conformStyle) string {
	var parts []string
	if n.Fail > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d %s failed", n.Fail, total, plural(total, noun, noun+"s")))
	} else {
		parts = append(parts, fmt.Sprintf("%d of %d %s passed", n.Pass, total, plural(total, noun, noun+"s")))
	}
	if n.NotVerifiable > 0 {
		parts = append(parts, fmt.Sprintf("%d not verifiable (not a pass: fix what the evidence names and run it again)", n.NotVerifiable))
	}
	verdict := s.green("PASS")
	if !passed {
		verdict = s.red("FAIL")
	}
	return fmt.Sprintf("Result: %s, %s.\n", verdict, strings.Join(parts, "; "))
}

type conformStyle struct{ color bool }

func (s conformStyle) wrap(code, text string) string {
	if !s.color {
		return text
	}
	return "\x1b[" + code + "m" + text + "\x1b[0m"
}
func (s conformStyle) bold(t string) string  { return s.wrap("1", t) }
func (s conformStyle) green(t string) string { return s.wrap("32", t) }
func (s conformStyle) red(t string) string   { return s.wrap("31", t) }

// status pads the verdict to one width before colouring it, so the titles line up either way.
func (s conformStyle) status(st string) string {
	padded := fmt.Sprintf("%-15s", st)
	switch st {
	case string(conform.Pass):
		return s.wrap("32", padded)
	case string(conform.Fail):
		return s.wrap("1;31", padded)
	default:
		return s.wrap("33", padded)
	}
}

func conformShortID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		id = id[:12]
	}
	if id == "" {
		return "(unknown)"
	}
	return termsafe.String(id)
}

// conformShellWord quotes an argv word for display when it needs it.
func conformShellWord(w string) string {
	if w != "" && !strings.ContainsFunc(w, func(r rune) bool {
		return !(r == '-' || r == '_' || r == '.' || r == '/' || r == ':' || r == '=' || r == ',' || r == '@' || r == '+' ||
			(r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9'))
	}) {
		return w
	}
	return "'" + strings.ReplaceAll(termsafe.String(w), "'", `'\''`) + "'"
}

// conformWrap breaks s into lines of at most width runes at spaces; a longer word stays whole.
func conformWrap(s string, width int) []string {
	words := strings.Fields(s)
	if len(words) == 0 {
		return []string{""}
	}
	var lines []string
	cur := words[0]
	for _, w := range words[1:] {
		if utf8.RuneCountInString(cur)+1+utf8.RuneCountInString(w) > width {
			lines = append(lines, cur)
			cur = w
			continue
		}
		cur += " " + w
	}
	return append(lines, cur)
}
