package views

import (
	"fmt"
	"html/template"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/internal/money"
)

// RunReport is what `runs show RUN --format html` draws: the run's records as the ledger keeps them, and its
// receipt as the caller found it.
type RunReport struct {
	Run     *ledger.RunRecord
	Nodes   []ledger.NodeRecord
	History map[string]NodeHistory
	Denials []ledger.EgressDenial
	Meters  []ledger.NodeMeters
	Receipt ReceiptStatus
}

// ReceiptStatus is what the report says of the run's receipt: where it is, the SHA-256 of its bytes, the plan
// digest it names, and whether a signature file lies beside it (checking it is `kewplan verify`'s job).
type ReceiptStatus struct {
	Path       string
	Found      bool
	SHA256     string
	PlanDigest string
	Signed     bool
	Problem    string // why it could not be read, "" when it could (or there is none)
}

// RunReportView writes the report to the command's output.
type RunReportView struct{ streams Streams }

// NewRunReport is the view of `runs show --format html`.
func NewRunReport(s Streams) *RunReportView { return &RunReportView{streams: s} }

// Show writes r as one self-contained HTML page: inline CSS and SVG, no script, nothing fetched.
func (v *RunReportView) Show(r RunReport) error { return WriteRunReport(v.streams.Stdout, r) }

// WriteRunReport renders r. Every string from the ledger (node names, models, verdict texts, hosts) is escaped by
// html/template for where it lands; nothing is marked safe.
func WriteRunReport(w io.Writer, r RunReport) error {
	return runReportTemplate.Execute(w, buildReport(r))
}

// Layout of the drawings, in SVG user units.
const (
	graphBoxW, graphBoxH, graphGap, graphCols = 230, 58, 12, 4
	timelineLabelW, timelineW, timelineRowH   = 230, 860, 18
	// A run with more nodes than this draws its timeline and graph by group (fan-out instances together).
	perNodeLimit = 60
)

type reportData struct {
	Run        *ledger.RunRecord
	Title      string
	Duration   string
	Cost       string
	ProxyCost  string
	Tokens     string
	ProxyTok   string
	Counts     []statusCount
	Graph      svgBox
	GraphBoxes []graphBox
	Timeline   timeline
	Groups     []reportGroup
	Denials    []reportDenial
	Verdicts   []reportVerdict
	Receipt    ReceiptStatus
	Generated  string
	NodeCount  int
}

type statusCount struct {
	Status, Class string
	N             int
}

type svgBox struct{ W, H int }

type graphBox struct {
	X, Y, W, H  int
	Label, Note string
	Title       string
	Segments    []segment
}

type segment struct {
	X, W  int
	Class string
}

type timeline struct {
	svgBox
	Rows  []timelineRow
	Ticks []tick
}

type tick struct {
	X     int
	Label string
}

type timelineRow struct {
	Y     int
	Label string
	Bars  []bar
}

type bar struct {
	X, W  int
	Class string
	Title string
}

type reportGroup struct {
	Name    string
	Summary string
	Single  bool
	Rows    []reportRow
}

type reportRow struct {
	Node, Status, Class, Runner, Model, Attempts, Duration string
	AgentTokens, AgentCost, ProxyTokens, ProxyCost         string
	Finding, Verdict                                       string
}

type reportDenial struct{ Time, Node, Method, Target, Reason, Refusal string }

type reportVerdict struct {
	Node, Verdict, Class, Summary string
	Findings                      []string
}

// groupOf is a node's fan-out group: its name before the instance key (`fix["web"]` is in group fix).
func groupOf(node string) string {
	if i := strings.IndexByte(node, '['); i > 0 {
		return node[:i]
	}
	return node
}

// statusClass is the colour class of a status: ok, fail, held, skip.
func statusClass(s string) string {
	switch s {
	case ledger.StatusSucceeded, ledger.StatusApproved, ledger.StatusReused:
		return "ok"
	case ledger.StatusSkipped, ledger.StatusPending:
		return "skip"
	case ledger.StatusHeld, ledger.StatusChangesRequested, ledger.StatusRunning:
		return "held"
	}
	return "fail"
}

func buildReport(r RunReport) *reportData {
	d := &reportData{Run: r.Run, Receipt: r.Receipt, NodeCount: len(r.Nodes), Generated: time.Now().UTC().Format(time.RFC3339)}
	d.Title = "kewplan run " + r.Run.ID
	if r.Run.EndedAt != nil {
		d.Duration = formatDuration(r.Run.EndedAt.Sub(r.Run.StartedAt))
	}
	d.Cost = runNodeCost(r.Run.CostUSD, r.Run.CostSource)
	d.Tokens = humanize.Comma(r.Run.InputTokens) + " in / " + humanize.Comma(r.Run.OutputTokens) + " out"
	proxy := proxyByNode(r.Meters)
	var pTok int64
	var pCost float64
	var pKnown bool
	for _, m := range proxy {
		pTok += m.Tokens
		if m.CostUSD != nil {
			pCost += *m.CostUSD
			pKnown = true
		}
	}
	if len(proxy) > 0 {
		d.ProxyTok = humanize.Comma(pTok)
		if pKnown {
			d.ProxyCost = money.USD(pCost)
		}
	}
	counts := map[string]int{}
	for _, n := range r.Nodes {
		counts[n.Status]++
	}
	for s, n := range counts {
		d.Counts = append(d.Counts, statusCount{Status: s, Class: statusClass(s), N: n})
	}
	sort.Slice(d.Counts, func(i, j int) bool { return d.Counts[i].Status < d.Counts[j].Status })
	groups := groupNodes(r.Nodes)
	d.Graph, d.GraphBoxes = drawGraph(groups, len(r.Nodes) > perNodeLimit)
	d.Timeline = drawTimeline(r, groups, len(r.Nodes) > perNodeLimit)
	d.Groups = tableGroups(groups, r, proxy)
	for _, x := range r.Denials {
		d.Denials = append(d.Denials, reportDenial{Time: x.Time.UTC().Format("15:04:05"), Node: x.Node, Method: x.Method, Target: x.HostPort(), Reason: x.Reason, Refusal: x.Refusal})
	}
	for _, n := range r.Nodes {
		if n.Verdict == "" && n.VerdictSummary == "" {
			continue
		}
		v := reportVerdict{Node: n.Node, Verdict: n.Verdict, Class: statusClass(n.Status), Summary: n.VerdictSummary}
		for i, f := range n.VerdictFindings {
			if i == 20 {
				v.Findings = append(v.Findings, fmt.Sprintf("… and %d more", len(n.VerdictFindings)-20))
				break
			}
			v.Findings = append(v.Findings, fmt.Sprintf("%s:%d: %s", f.Path, f.Line, f.Message))
		}
		d.Verdicts = append(d.Verdicts, v)
	}
	return d
}

type nodeGroup struct {
	name  string
	nodes []ledger.NodeRecord
}

// groupNodes keeps the ledger's order of first appearance.
func groupNodes(nodes []ledger.NodeRecord) []nodeGroup {
	idx := map[string]int{}
	var out []nodeGroup
	for _, n := range nodes {
		g := groupOf(n.Node)
		i, ok := idx[g]
		if !ok {
			i = len(out)
			idx[g] = i
			out = append(out, nodeGroup{name: g})
		}
		out[i].nodes = append(out[i].nodes, n)
	}
	return out
}

// proxyByNode adds up the proxy's meter over a node's attempts.
func proxyByNode(meters []ledger.NodeMeters) map[string]ledger.MeterSide {
	out := map[string]ledger.MeterSide{}
	for _, m := range meters {
		s := out[m.Node]
		s.InputTokens += m.Proxy.InputTokens
		s.OutputTokens += m.Proxy.OutputTokens
		s.Tokens += m.Proxy.Tokens
		if m.Proxy.CostUSD != nil {
			c := *m.Proxy.CostUSD
			if s.CostUSD != nil {
				c += *s.CostUSD
			}
			s.CostUSD = &c
		}
		s.CostSource = m.Proxy.CostSource
		out[m.Node] = s
	}
	return out
}

// drawGraph is one box per node, or per group when grouped, with its status as coloured segments.
func drawGraph(groups []nodeGroup, grouped bool) (svgBox, []graphBox) {
	var boxes []graphBox
	add := func(label, note, title string, nodes []ledger.NodeRecord) {
		i := len(boxes)
		b := graphBox{X: graphGap + (i%graphCols)*(graphBoxW+graphGap), Y: graphGap + (i/graphCols)*(graphBoxH+graphGap), W: graphBoxW, H: graphBoxH,
			Label: clip(label, 30), Note: note, Title: title}
		counts := map[string]int{}
		for _, n := range nodes {
			counts[statusClass(n.Status)]++
		}
		x := 0
		for _, c := range []string{"ok", "held", "fail", "skip"} {
			if counts[c] == 0 {
				continue
			}
			w := counts[c] * (graphBoxW - 16) / len(nodes)
			if w == 0 {
				w = 1
			}
			b.Segments = append(b.Segments, segment{X: b.X + 8 + x, W: w, Class: c})
			x += w
		}
		boxes = append(boxes, b)
	}
	for _, g := range groups {
		if grouped || len(g.nodes) > 1 && len(g.nodes) > perNodeLimit/4 {
			add(g.name, fmt.Sprintf("%d instances: %s", len(g.nodes), groupSummary(g.nodes)), g.name, g.nodes)
			continue
		}
		for _, n := range g.nodes {
			add(n.Node, n.Status, n.Node+": "+n.Status, []ledger.NodeRecord{n})
		}
	}
	rows := (len(boxes) + graphCols - 1) / graphCols
	return svgBox{W: graphGap + graphCols*(graphBoxW+graphGap), H: graphGap + rows*(graphBoxH+graphGap)}, boxes
}

// groupSummary counts a group's statuses: "48 succeeded, 2 failed".
func groupSummary(nodes []ledger.NodeRecord) string {
	counts := map[string]int{}
	for _, n := range nodes {
		counts[n.Status]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", counts[k], k)
	}
	return strings.Join(parts, ", ")
}

// attemptsOf are a node's attempts, or the node itself as its one attempt.
func attemptsOf(n ledger.NodeRecord, hist map[string]NodeHistory) []AttemptJSON {
	if h, ok := hist[n.Node]; ok && len(h.Attempts) > 0 {
		return h.Attempts
	}
	return attemptFromRecord(n)
}

// drawTimeline is a row per node (per group when grouped) with a bar per attempt, on the run's time axis.
func drawTimeline(r RunReport, groups []nodeGroup, grouped bool) timeline {
	start := r.Run.StartedAt
	end := start
	if r.Run.EndedAt != nil {
		end = *r.Run.EndedAt
	}
	for _, n := range r.Nodes {
		if n.EndedAt != nil && n.EndedAt.After(end) {
			end = *n.EndedAt
		}
	}
	span := end.Sub(start)
	if span <= 0 {
		span = time.Second
	}
	xOf := func(t time.Time) int {
		x := int(float64(t.Sub(start)) / float64(span) * timelineW)
		return timelineLabelW + min(max(x, 0), timelineW)
	}
	var tl timeline
	addRow := func(label string, nodes []ledger.NodeRecord) {
		row := timelineRow{Y: 24 + len(tl.Rows)*timelineRowH, Label: clip(label, 32)}
		for _, n := range nodes {
			for _, a := range attemptsOf(n, r.History) {
				if a.StartedAt == nil {
					continue
				}
				ae := end
				if a.EndedAt != nil {
					ae = *a.EndedAt
				}
				x1, x2 := xOf(*a.StartedAt), xOf(ae)
				title := fmt.Sprintf("%s attempt %d: %s, %s", n.Node, a.Attempt, a.Status, formatDuration(ae.Sub(*a.StartedAt)))
				row.Bars = append(row.Bars, bar{X: x1, W: max(x2-x1, 2), Class: statusClass(a.Status), Title: title})
			}
		}
		tl.Rows = append(tl.Rows, row)
	}
	for _, g := range groups {
		if grouped && len(g.nodes) > 1 {
			addRow(fmt.Sprintf("%s (%d)", g.name, len(g.nodes)), g.nodes)
			continue
		}
		for _, n := range g.nodes {
			addRow(n.Node, []ledger.NodeRecord{n})
		}
	}
	for i := 0; i <= 4; i++ {
		label := "0s"
		if i > 0 {
			label = formatDuration(span * time.Duration(i) / 4)
		}
		tl.Ticks = append(tl.Ticks, tick{X: timelineLabelW + i*timelineW/4, Label: label})
	}
	tl.W, tl.H = timelineLabelW+timelineW+60, 24+len(tl.Rows)*timelineRowH+8
	return tl
}

func tableGroups(groups []nodeGroup, r RunReport, proxy map[string]ledger.MeterSide) []reportGroup {
	findings := map[string]string{}
	for _, m := range r.Meters {
		if m.Finding != "" {
			findings[m.Node] = m.Finding
		}
	}
	var out []reportGroup
	for _, g := range groups {
		rg := reportGroup{Name: g.name, Single: len(g.nodes) == 1, Summary: groupSummary(g.nodes)}
		// Nodes of no fan-out share one table.
		if rg.Single && len(out) > 0 && out[len(out)-1].Single {
			rg = out[len(out)-1]
			out = out[:len(out)-1]
		}
		for _, n := range g.nodes {
			row := reportRow{Node: n.Node, Status: n.Status, Class: statusClass(n.Status), Runner: n.Runner, Model: n.RoutedModel,
				Attempts: fmt.Sprint(max(n.Attempts, len(attemptsOf(n, r.History)))), Duration: formatDuration(n.Duration()),
				AgentTokens: humanize.Comma(n.InputTokens + n.OutputTokens + n.CacheWriteTokens), AgentCost: runNodeCost(n.CostUSD, n.CostSource),
				Finding: findings[n.Node], Verdict: n.Verdict}
			if p, ok := proxy[n.Node]; ok {
				row.ProxyTokens = humanize.Comma(p.Tokens)
				row.ProxyCost = "unknown"
				if p.CostUSD != nil {
					row.ProxyCost = money.USD(*p.CostUSD)
				}
			}
			rg.Rows = append(rg.Rows, row)
		}
		out = append(out, rg)
	}
	return out
}

// clip shortens a label for a drawing (the tables keep it whole).
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

var runReportTemplate *template.Template // runreport_html.go
