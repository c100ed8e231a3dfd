package views

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/kewplan/kewplan/internal/termsafe"

	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/plandiff"
)

// markdownCommentLimit is GitHub's limit on the body of a pull-request comment, in characters. The diff comment
// is cut to fit in bytes, which is never more than characters, so a cut comment always posts.
const markdownCommentLimit = 65536

// diffCommentMarker opens every diff comment, so a CI job can find its earlier comment and update it in place.
const diffCommentMarker = "<!-- kewplan-diff -->"

// writeDiffMarkdown writes the diff as a pull-request comment: the verdict line, a summary table, the credential
// exposure delta first, then nodes added, removed and changed with each argv diff in a collapsible section, and
// the diagnostics. It never exceeds markdownCommentLimit: what does not fit is left out with a note saying so.
//
// Every value from the plans is escaped: a pull request controls its configuration, and must not be able to
// forge the verdict, close a table or a <details> element, or mention people in the comment.
func writeDiffMarkdown(w io.Writer, d *plandiff.Diff) error {
	// Every value is escaped where it is quoted; the last pass (termsafe.Text) is a guard for any that is not.
	_, err := io.WriteString(w, termsafe.Text(diffMarkdown(d, markdownCommentLimit)))
	return err
}

// diffMarkdown renders the comment within limit bytes: the verdict and counts, the sections, and the footer
// naming the plans.
func diffMarkdown(d *plandiff.Diff, limit int) string {
	// File names only: a CI job's absolute paths say nothing to the reader of a comment.
	foot := fmt.Sprintf("\n<sub>Base %s, head %s (config digests %s and %s).</sub>\n", mdCode(filepath.Base(d.Base.Name)),
		mdCode(filepath.Base(d.Head.Name)), mdCode(orNone(d.Base.ConfigDigest)), mdCode(orNone(d.Head.ConfigDigest)))
	return mdFit(mdHead(d), mdSections(d), foot, limit)
}

// mdHead is the comment's marker, title, verdict line and summary table.
func mdHead(d *plandiff.Diff) string {
	var head strings.Builder
	wCount, nCount := d.Counts()
	head.WriteString(diffCommentMarker + "\n")
	head.WriteString("## kewplan diff\n\n")
	switch diffVerdict(d) {
	case verdictWidened:
		head.WriteString("**:warning: " + mdText(diffVerdictLine(d)) + "**\n")
	default:
		head.WriteString("**:white_check_mark: " + mdText(diffVerdictLine(d)) + "**\n")
	}
	fmt.Fprintf(&head, "\n| | Count |\n|---|---:|\n")
	fmt.Fprintf(&head, "| Widening changes | %d |\n| Narrowing changes | %d |\n", wCount, nCount)
	fmt.Fprintf(&head, "| Nodes added | %d |\n| Nodes removed | %d |\n| Nodes changed | %d |\n",
		len(d.Added), len(d.Removed), len(d.Changed))
	fmt.Fprintf(&head, "| New diagnostics | %d |\n| Resolved diagnostics | %d |\n",
		len(d.DiagnosticsAdded), len(d.DiagnosticsResolved))
	return head.String()
}

// mdSection is a heading and a list of blocks; each block is whole (a table row, a node with its closed
// <details>), so a cut never leaves markup open. The heading goes with the first block.
type mdSection struct {
	heading string
	blocks  []string
}

// mdSections are the comment's sections, the credential exposure delta first.
func mdSections(d *plandiff.Diff) []mdSection {
	var sections []mdSection
	if len(d.Exposure) > 0 {
		s := mdSection{heading: "\n### Credential exposure delta\n\n| | Node | Change |\n|---|---|---|\n"}
		for _, f := range d.Exposure {
			mark := "narrowing"
			if f.Widening {
				mark = "**widening**"
			}
			node := "(the apply)"
			if f.Node != "" {
				node = mdCode(f.Node)
			}
			s.blocks = append(s.blocks, fmt.Sprintf("| %s | %s | %s |\n", mark, node, mdText(f.Message)))
		}
		sections = append(sections, s)
	}
	if len(d.Added) > 0 {
		s := mdSection{heading: "\n### Nodes added\n\n| Node | Runner | Role | Network | Isolation | Image | Credentials |\n|---|---|---|---|---|---|---|\n"}
		for _, n := range d.Added {
			s.blocks = append(s.blocks, fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s |\n", mdCode(n.Name), mdCode(n.Runner),
				mdText(orNone(n.Role)), mdText(orNone(n.Network)), mdText(orNone(n.Isolation)), mdCode(orNone(n.Image)), mdCodeList(n.Credentials)))
		}
		sections = append(sections, s)
	}
	if len(d.Removed) > 0 {
		s := mdSection{heading: "\n### Nodes removed\n\n"}
		for _, n := range d.Removed {
			s.blocks = append(s.blocks, fmt.Sprintf("- %s (runner %s)\n", mdCode(n.Name), mdCode(n.Runner)))
		}
		sections = append(sections, s)
	}
	if len(d.Changed) > 0 {
		s := mdSection{heading: "\n### Nodes changed\n"}
		for _, c := range d.Changed {
			s.blocks = append(s.blocks, mdNodeChange(c))
		}
		sections = append(sections, s)
	}
	if len(d.DiagnosticsAdded) > 0 || len(d.DiagnosticsResolved) > 0 {
		s := mdSection{heading: "\n### Diagnostics\n\n"}
		for _, x := range d.DiagnosticsAdded {
			s.blocks = append(s.blocks, "- New: "+mdText(diagnosticLine(x))+"\n")
		}
		for _, x := range d.DiagnosticsResolved {
			s.blocks = append(s.blocks, "- Resolved: "+mdText(diagnosticLine(x))+"\n")
		}
		sections = append(sections, s)
	}
	if len(d.PolicyFindings) > 0 {
		s := mdSection{heading: "\n### Policy rules\n\n| Level | Rule | Finding |\n|---|---|---|\n"}
		for _, x := range d.PolicyFindings {
			level := "warn"
			if x.Policy != nil {
				level = x.Policy.Level
			}
			if x.Severity == jsonplan.SeverityError {
				level = "**" + level + "**"
			}
			s.blocks = append(s.blocks, fmt.Sprintf("| %s | %s | %s |\n", level, mdCode(x.Rule), mdText(policyFindingLine(x))))
		}
		sections = append(sections, s)
	}
	if d.Empty() {
		sections = append(sections, mdSection{heading: "\nThe plans are the same for review.\n"})
	}
	return sections
}

// mdFit writes head, as many whole blocks of sections as fit in limit bytes, a note when some did not, and foot.
func mdFit(head string, sections []mdSection, foot string, limit int) string {
	total := 0
	for _, s := range sections {
		total += len(s.blocks)
	}
	var b strings.Builder
	b.WriteString(head)
	// Room kept for the truncation note and the footer, whatever is left out.
	reserve := len(foot) + 400
	budget := limit - reserve - b.Len()
	shown := 0
	cut := false
	for _, s := range sections {
		if cut {
			break
		}
		if len(s.blocks) == 0 {
			if len(s.heading) <= budget {
				b.WriteString(s.heading)
				budget -= len(s.heading)
			}
			continue
		}
		for i, block := range s.blocks {
			piece := block
			if i == 0 {
				piece = s.heading + block
			}
			if len(piece) > budget {
				cut = true
				break
			}
			b.WriteString(piece)
			budget -= len(piece)
			shown++
		}
	}
	if cut {
		fmt.Fprintf(&b, "\n> [!NOTE]\n> This comment is truncated: %d of %d entries are not shown, to stay under GitHub's "+
			"%d-character comment limit. The exposure delta comes first, so every widening change listed above is real; "+
			"run `kewplan diff` on the two plans (or read the job's SARIF upload) for the whole diff.\n",
			total-shown, total, markdownCommentLimit)
	}
	b.WriteString(foot)
	return b.String()
}

// mdNodeChange renders one changed node, its argv diff in a collapsible section.
func mdNodeChange(c plandiff.NodeChange) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n#### %s\n\n", mdCode(c.Name))
	for _, f := range c.Fields {
		fmt.Fprintf(&b, "- %s: %s → %s\n", mdText(f.Field), mdCode(orNone(f.Base)), mdCode(orNone(f.Head)))
	}
	if len(c.DependsOnAdded) > 0 || len(c.DependsOnRemoved) > 0 {
		fmt.Fprintf(&b, "- depends on: %s\n", mdCode(dependsText(c)))
	}
	if c.Argv != nil {
		lines := diffArgvHunks(diffArgvLines(c.Argv), diffArgvContext)
		text := make([]string, len(lines))
		for i, l := range lines {
			text[i] = termsafe.String(l.Op + " " + l.Text)
		}
		body := strings.Join(text, "\n")
		fence := mdFence(body)
		fmt.Fprintf(&b, "\n<details><summary>argv diff of <code>%s</code></summary>\n\n%sdiff\n%s\n%s\n\n</details>\n",
			mdHTML(termsafe.String(c.Name)), fence, body, fence)
	}
	return b.String()
}

// mdFence is a code fence longer than any run of backticks in body, so the body cannot close it.
func mdFence(body string) string {
	longest, run := 0, 0
	for _, r := range body {
		if r == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return strings.Repeat("`", max(3, longest+1))
}

// mdHTML escapes text for HTML (inside <code> or a <summary>); '|' is escaped too, for table cells, and '@' so
// no mention is formed.
var mdHTMLEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "|", "&#124;",
	"@", "&#64;", "\n", " ", "\r", " ")

func mdHTML(s string) string { return mdHTMLEscaper.Replace(s) }

// mdCode renders a value as inline code. Inline code is literal in markdown (no emphasis, links or mentions);
// a value holding a backtick, which would end the span, is written as an HTML <code> element instead.
func mdCode(s string) string {
	s = termsafe.String(strings.NewReplacer("\n", " ", "\r", " ").Replace(s))
	if strings.Contains(s, "`") {
		return "<code>" + mdHTML(s) + "</code>"
	}
	return "`" + strings.ReplaceAll(s, "|", `\|`) + "`"
}

func mdCodeList(list []string) string {
	if len(list) == 0 {
		return "(none)"
	}
	parts := make([]string, len(list))
	for i, s := range list {
		parts[i] = mdCode(s)
	}
	return strings.Join(parts, ", ")
}

// mdTextEscaper escapes markdown and HTML syntax in running text: a message quotes values from the plans.
var mdTextEscaper = strings.NewReplacer(
	`\`, `\\`, "`", "\\`", "*", `\*`, "_", `\_`, "[", `\[`, "]", `\]`, "<", "&lt;", ">", "&gt;", "|", `\|`,
	"#", `\#`, "~", `\~`, "!", `\!`, "@", "&#64;", "&", "&amp;", "\n", " ", "\r", " ",
)

// mdText escapes control characters and bidirectional overrides (termsafe.String) before markdown syntax: the
// comment is read on a page, but also in a terminal (gh pr view, a CI log).
func mdText(s string) string { return mdTextEscaper.Replace(termsafe.String(s)) }
