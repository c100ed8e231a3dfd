package views

import (
	"html/template"

	"github.com/kewplan/kewplan/internal/termsafe"
)

// reportFuncs: t makes controls, bidirectional marks and invalid UTF-8 visible (as the terminal views do) before
// html/template escapes the text for where it lands; m is t keeping line breaks, for verdict summaries.
var reportFuncs = template.FuncMap{"t": termsafe.String, "m": termsafe.Text}

func init() {
	runReportTemplate = template.Must(template.New("report").Funcs(reportFuncs).Parse(runReportHTML))
}

// runReportHTML is the page. No script, no external reference: the Content-Security-Policy says so to the browser
// too, so a string that escaped escaping still could not load or run anything.
const runReportHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{t .Title}}</title>
<style>
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#1d2330;background:#fff}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px;border-bottom:1px solid #d8dde6;padding-bottom:4px}
.meta{color:#5a6475}.meta b{color:#1d2330}
table{border-collapse:collapse;width:100%;font-size:13px}th,td{text-align:left;padding:3px 8px;border-bottom:1px solid #eef0f4;vertical-align:top}
th{background:#f5f7fa;font-weight:600}td.n{text-align:right;font-variant-numeric:tabular-nums}
.pill{display:inline-block;padding:0 8px;border-radius:9px;font-size:12px;margin-right:6px}
.ok{background:#d6f5df;color:#135c2a}.fail{background:#fbdada;color:#8a1414}.held{background:#fdf0c8;color:#6b5000}.skip{background:#e8ebf0;color:#4a5261}
svg .ok{fill:#3fb463}svg .fail{fill:#d64545}svg .held{fill:#e0b028}svg .skip{fill:#aab2bf}
svg .box{fill:#f7f9fc;stroke:#c9d0db}svg text{font:12px system-ui,sans-serif;fill:#1d2330}svg .note{fill:#5a6475;font-size:11px}
svg .grid{stroke:#e3e7ee}
details{margin:2px 0}summary{cursor:pointer;padding:3px 0}
pre{white-space:pre-wrap;word-break:break-word;background:#f7f9fc;padding:8px;margin:4px 0;font-size:12px}
.scroll{overflow-x:auto}
</style>
</head>
<body>
<h1>{{t .Title}}</h1>
<div class="meta">status <b>{{t .Run.Status}}</b> · started <b>{{.Run.StartedAt.UTC.Format "2006-01-02 15:04:05 UTC"}}</b>{{if .Duration}} · took <b>{{.Duration}}</b>{{end}} · <b>{{.NodeCount}}</b> nodes · kewplan {{t .Run.KewplanVersion}}</div>
<div class="meta">cost (agents) <b>{{.Cost}}</b>{{if .ProxyCost}} · cost (proxy) <b>{{.ProxyCost}}</b>{{end}} · tokens (agents) <b>{{.Tokens}}</b>{{if .ProxyTok}} · tokens (proxy) <b>{{.ProxyTok}}</b>{{end}}</div>
<p>{{range .Counts}}<span class="pill {{.Class}}">{{t .Status}} {{.N}}</span>{{end}}</p>

<h2>Graph</h2>
<div class="scroll"><svg id="graph" xmlns="http://www.w3.org/2000/svg" width="{{.Graph.W}}" height="{{.Graph.H}}" viewBox="0 0 {{.Graph.W}} {{.Graph.H}}" role="img" aria-label="nodes by status">
{{range .GraphBoxes}}<g class="node"><title>{{t .Title}}</title><rect class="box" x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="{{.H}}" rx="6"/>
<text x="{{.X}}" dx="8" y="{{.Y}}" dy="18">{{t .Label}}</text><text class="note" x="{{.X}}" dx="8" y="{{.Y}}" dy="34">{{t .Note}}</text>
{{$y := .Y}}{{range .Segments}}<rect class="{{.Class}}" x="{{.X}}" y="{{$y}}" transform="translate(0 42)" width="{{.W}}" height="8"/>{{end}}</g>
{{end}}</svg></div>

<h2>Timeline</h2>
<div class="scroll"><svg id="timeline" xmlns="http://www.w3.org/2000/svg" width="{{.Timeline.W}}" height="{{.Timeline.H}}" viewBox="0 0 {{.Timeline.W}} {{.Timeline.H}}" role="img" aria-label="attempts over time">
{{range .Timeline.Ticks}}<line class="grid" x1="{{.X}}" x2="{{.X}}" y1="16" y2="{{$.Timeline.H}}"/><text class="note" x="{{.X}}" y="12">{{.Label}}</text>
{{end}}{{range .Timeline.Rows}}<text x="4" y="{{.Y}}" dy="13">{{t .Label}}</text>{{$y := .Y}}{{range .Bars}}<rect class="{{.Class}}" x="{{.X}}" y="{{$y}}" transform="translate(0 3)" width="{{.W}}" height="12" opacity="0.85"><title>{{t .Title}}</title></rect>{{end}}
{{end}}</svg></div>

<h2>Nodes</h2>
{{range .Groups}}{{if .Single}}{{template "rows" .}}{{else}}<details><summary><b>{{t .Name}}</b> — {{len .Rows}} instances: {{t .Summary}}</summary>{{template "rows" .}}</details>{{end}}
{{end}}

<h2>Egress denials</h2>
{{if .Denials}}<table><tr><th>time</th><th>node</th><th>method</th><th>target</th><th>reason</th><th>refusal</th></tr>
{{range .Denials}}<tr><td>{{.Time}}</td><td>{{t .Node}}</td><td>{{t .Method}}</td><td>{{t .Target}}</td><td>{{t .Reason}}</td><td>{{t .Refusal}}</td></tr>
{{end}}</table>{{else}}<p class="meta">The egress proxy refused nothing.</p>{{end}}

<h2>Verdicts</h2>
{{if .Verdicts}}{{range .Verdicts}}<div><span class="pill {{.Class}}">{{t .Verdict}}</span><b>{{t .Node}}</b><pre>{{m .Summary}}</pre>{{if .Findings}}<ul>{{range .Findings}}<li>{{t .}}</li>{{end}}</ul>{{end}}</div>
{{end}}{{else}}<p class="meta">No reviewer gave a verdict.</p>{{end}}

<h2>Receipt</h2>
{{if .Receipt.Found}}<table><tr><th>file</th><td>{{t .Receipt.Path}}</td></tr><tr><th>SHA-256</th><td>{{t .Receipt.SHA256}}</td></tr>
<tr><th>plan digest</th><td>{{t .Receipt.PlanDigest}}</td></tr><tr><th>signature</th><td>{{if .Receipt.Signed}}signature file present (check it with kewplan verify){{else}}unsigned{{end}}</td></tr></table>
{{else if .Receipt.Problem}}<p class="meta">{{t .Receipt.Problem}}</p>{{else}}<p class="meta">No receipt was written for this run{{if .Receipt.Path}} ({{t .Receipt.Path}}){{end}}.</p>{{end}}
<p class="meta">Generated by kewplan runs show --format html at {{.Generated}}.</p>
</body>
</html>
{{define "rows"}}<table><tr><th>node</th><th>status</th><th>runner</th><th>model</th><th>attempts</th><th>duration</th><th>tokens (agent)</th><th>cost (agent)</th><th>tokens (proxy)</th><th>cost (proxy)</th><th>meters</th><th>verdict</th></tr>
{{range .Rows}}<tr><td>{{t .Node}}</td><td><span class="pill {{.Class}}">{{t .Status}}</span></td><td>{{t .Runner}}</td><td>{{t .Model}}</td><td class="n">{{.Attempts}}</td><td class="n">{{.Duration}}</td><td class="n">{{.AgentTokens}}</td><td class="n">{{.AgentCost}}</td><td class="n">{{.ProxyTokens}}</td><td class="n">{{.ProxyCost}}</td><td>{{t .Finding}}</td><td>{{t .Verdict}}</td></tr>
{{end}}</table>{{end}}`
