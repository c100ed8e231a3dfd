package views

import (
	"bytes"
	"fmt"
	"html"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/verdict"
)

// hostileNames are node names and texts an agent or a configuration could put in the ledger, each trying to get
// out of the text it lands in.
var hostileNames = []string{
	`<script>alert(1)</script>`,
	`"><img src=x onerror=alert(2)>`,
	`</text></svg><iframe src="https://evil.test/">`,
	"esc\x1b[31mred\x1b[0m",
	"bidi\u202egnp.exe",
	`{{.Run.ID}}`,
}

// syntheticReport is a run of n nodes: the hostile names first, then fan-out instances `fix["i"]` of one group,
// with two attempts each (the first failed), a verdict, both meters and a denial per hostile name.
func syntheticReport(n int) RunReport {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	end := t0.Add(10 * time.Minute)
	run := &ledger.RunRecord{ID: "20261201T100000Z-abc123", StartedAt: t0, EndedAt: &end, Status: ledger.RunFailed, KewplanVersion: "test", InputTokens: 1000, OutputTokens: 200}
	cost := 1.25
	run.CostUSD, run.CostSource = &cost, ledger.CostReported
	r := RunReport{Run: run, History: map[string]NodeHistory{}, Receipt: ReceiptStatus{Path: "/s/receipts/x.json", Found: true, SHA256: "sha256:00", PlanDigest: "sha256:11", Signed: true}}
	names := append([]string(nil), hostileNames...)
	for i := len(names); i < n; i++ {
		names = append(names, fmt.Sprintf(`fix["repo-%03d"]`, i))
	}
	for i, name := range names[:n] {
		s := t0.Add(time.Duration(i%40) * 10 * time.Second)
		mid, e := s.Add(20*time.Second), s.Add(60*time.Second)
		status := ledger.StatusSucceeded
		if i%7 == 3 {
			status = ledger.StatusFailed
		}
		c := 0.01
		node := ledger.NodeRecord{Node: name, Runner: "claude-code", RoutedModel: "claude-sonnet-4-5", Status: status, StartedAt: &s, EndedAt: &e,
			InputTokens: 100, OutputTokens: 20, CostUSD: &c, CostSource: ledger.CostReported, Attempts: 2}
		if i < len(hostileNames) {
			node.Verdict, node.VerdictSummary = "approve", "looks fine "+hostileNames[i]+"\nsecond line"
			node.VerdictFindings = []verdict.Finding{{Path: hostileNames[i], Line: 3, Message: hostileNames[i]}}
			r.Denials = append(r.Denials, ledger.EgressDenial{Node: name, Method: "CONNECT", Host: hostileNames[i], Port: 443, Reason: "not_allowed", Refusal: hostileNames[i], Time: mid})
		}
		r.Nodes = append(r.Nodes, node)
		r.History[name] = NodeHistory{Attempts: []AttemptJSON{
			{Attempt: 1, Status: ledger.StatusFailed, StartedAt: &s, EndedAt: &mid},
			{Attempt: 2, Status: status, StartedAt: &mid, EndedAt: &e},
		}}
		pc := 0.02
		r.Meters = append(r.Meters, ledger.NodeMeters{Node: name, Attempt: 2, Proxy: ledger.MeterSide{Tokens: 130, CostUSD: &pc}, Finding: ""})
	}
	return r
}

func renderReport(t testing.TB, r RunReport) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteRunReport(&b, r); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

var (
	tag          = regexp.MustCompile(`<[a-zA-Z][^>]*>`)
	fetchingAttr = regexp.MustCompile(`(?i)\s(src|href|action|formaction|srcset|poster|data|on[a-z]+)\s*=`)
	markup       = regexp.MustCompile(`(?i)<(script|iframe|img|object|embed|link|base|meta http-equiv="refresh")`)
)

// TestRunReportIsSelfContainedAndEscaped: the page fetches nothing and runs nothing, every hostile string appears
// only as text, no control character reaches the page, and every node is named.
func TestRunReportIsSelfContainedAndEscaped(t *testing.T) {
	page := renderReport(t, syntheticReport(20))
	for _, tg := range tag.FindAllString(page, -1) {
		if m := fetchingAttr.FindString(tg); m != "" {
			t.Errorf("the page has a tag with an attribute that fetches or runs: %q", tg)
		}
	}
	if m := markup.FindString(page); m != "" {
		t.Errorf("the page has active markup: %q", m)
	}
	if strings.Contains(page, "http://") && strings.Count(page, "http://") != strings.Count(page, `xmlns="http://www.w3.org/2000/svg"`) {
		t.Errorf("the page names a URL other than the SVG namespace")
	}
	if strings.ContainsAny(page, "\x1b\u202e") {
		t.Errorf("a control character or bidirectional mark reached the page")
	}
	if !strings.Contains(page, `default-src 'none'`) {
		t.Errorf("no Content-Security-Policy forbidding fetches")
	}
	text := html.UnescapeString(page)
	for _, want := range []string{"<script>alert(1)</script>", `"><img src=x onerror=alert(2)>`, `{{.Run.ID}}`, `esc\x1b[31mred`, "looks fine", "second line", "signature file present", "sha256:11"} {
		if !strings.Contains(text, want) {
			t.Errorf("the page does not show %q as text", want)
		}
	}
	for _, n := range syntheticReport(20).Nodes {
		want := html.EscapeString(n.Node)
		if strings.ContainsAny(n.Node, "\x1b\u202e") {
			continue // shown through the escaper, checked above
		}
		if !strings.Contains(page, want) && !strings.Contains(page, strings.ReplaceAll(want, "&#34;", "&quot;")) && !strings.Contains(html.UnescapeString(page), n.Node) {
			t.Errorf("node %q is not on the page", n.Node)
		}
	}
}

// TestRunReportGroupsAFanOut: at 500 nodes the graph and timeline draw the fan-out as one group, the table folds
// its instances, and every instance is still named.
func TestRunReportGroupsAFanOut(t *testing.T) {
	r := syntheticReport(500)
	page := renderReport(t, r)
	text := html.UnescapeString(page)
	if !strings.Contains(text, "fix (494)") || !strings.Contains(text, "494 instances") {
		t.Errorf("the fan-out group is not drawn as one (want a timeline row \"fix (494)\" and a box of 494 instances)")
	}
	for _, n := range r.Nodes[len(hostileNames):] {
		if !strings.Contains(text, ">"+n.Node+"<") {
			t.Fatalf("instance %s is not in the table", n.Node)
		}
	}
	if rows := strings.Count(page, `<g class="node">`); rows != 1+len(hostileNames) {
		t.Errorf("%d graph boxes, want %d (the group and each other node)", rows, 1+len(hostileNames))
	}
	if len(page) > 3<<20 {
		t.Errorf("the page of 500 nodes is %d bytes", len(page))
	}
}

// BenchmarkRunReport1000 renders the report of a 1,000-node run (make bench; the bound is 2 s).
func BenchmarkRunReport1000(b *testing.B) {
	r := syntheticReport(1000)
	var buf bytes.Buffer
	b.ResetTimer()
	for b.Loop() {
		buf.Reset()
		if err := WriteRunReport(&buf, r); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(buf.Len()), "page-bytes")
}
