package views

import (
	"fmt"
	"io"
	"strings"

	"github.com/dustin/go-humanize"
	"github.com/hashicorp/hcl/v2"
	"github.com/rogpeppe/go-internal/diff"

	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/internal/termsafe"
	"github.com/kewplan/kewplan/plandiff"
	"github.com/kewplan/kewplan/planner"
	"github.com/kewplan/kewplan/runners"
)

// Runners is the view of `kewplan runners`.
type Runners interface {
	Diagnostics(diags hcl.Diagnostics, files ...map[string][]byte)
	Runners(list []planner.RunnerInfo) error
}

// NewRunners returns runners' view: a table, or JSON.
func NewRunners(vt ViewType, s Streams) Runners { return &runnersView{NewView(s), vt} }

type runnersView struct {
	*View
	vt ViewType
}

func (v *runnersView) Runners(list []planner.RunnerInfo) error {
	if v.vt == viewJSON {
		return writeRunnersJSON(v.streams.Stdout, list)
	}
	return writeRunnersHuman(v.streams.Stdout, list)
}

// Runs is the view of `kewplan runs` and `kewplan runs show`.
type Runs interface {
	List(runs []ledger.RunRecord) error
	Run(run *ledger.RunRecord, nodes []ledger.NodeRecord) error
	// RunHistory is Run with each node's attempts and reuse (by node name).
	RunHistory(run *ledger.RunRecord, nodes []ledger.NodeRecord, hist map[string]NodeHistory) error
	// RunEgress is RunHistory with the run's refused egress requests, and in --json both meters of every
	// brokered attempt (the human view lists them with Meters).
	RunEgress(run *ledger.RunRecord, nodes []ledger.NodeRecord, hist map[string]NodeHistory, denials []ledger.EgressDenial, meters []ledger.NodeMeters) error
	// Brokered lists, after the run (human view only), the requests kewplan's proxy brokered per node.
	Brokered(reqs []ledger.BrokerRequest) error
	// Meters lists, after the run (human view only), both meters of every brokered attempt and their findings.
	Meters(meters []ledger.NodeMeters) error
}

// NewRuns returns the runs' view: tables, or JSON.
func NewRuns(vt ViewType, s Streams) Runs { return &runsView{NewView(s), vt} }

type runsView struct {
	*View
	vt ViewType
}

func (v *runsView) List(runs []ledger.RunRecord) error {
	if v.vt == viewJSON {
		return writeRunsJSON(v.streams.Stdout, runs)
	}
	return writeRunsHuman(v.streams.Stdout, runs)
}

func (v *runsView) Run(run *ledger.RunRecord, nodes []ledger.NodeRecord) error {
	return v.RunHistory(run, nodes, nil)
}

func (v *runsView) RunHistory(run *ledger.RunRecord, nodes []ledger.NodeRecord, hist map[string]NodeHistory) error {
	return v.RunEgress(run, nodes, hist, nil, nil)
}

func (v *runsView) RunEgress(run *ledger.RunRecord, nodes []ledger.NodeRecord, hist map[string]NodeHistory, denials []ledger.EgressDenial, meters []ledger.NodeMeters) error {
	if v.vt == viewJSON {
		return writeRunMeteredJSON(v.streams.Stdout, run, nodes, hist, denials, meters)
	}
	return writeRunEgressHuman(v.streams.Stdout, run, nodes, hist, denials)
}

func (v *runsView) Brokered(reqs []ledger.BrokerRequest) error {
	if v.vt == viewJSON || len(reqs) == 0 {
		return nil
	}
	type tally struct {
		n, refused, unsettled int
		in, out, msecs        int64
	}
	var order []string
	by := map[string]*tally{}
	for _, r := range reqs {
		t := by[r.Node]
		if t == nil {
			t = &tally{}
			by[r.Node] = t
			order = append(order, r.Node)
		}
		t.n++
		if r.Status >= 400 || r.Reason != "" {
			t.refused++
		}
		if r.Unsettled {
			t.unsettled++
		}
		t.in, t.out, t.msecs = t.in+r.BytesIn, t.out+r.BytesOut, t.msecs+r.DurationMS
	}
	w := v.streams.Stdout
	fmt.Fprintf(w, "\nBrokered requests (the proxy added the real credential)\n")
	for _, node := range order {
		t := by[node]
		unsettled := ""
		if t.unsettled > 0 {
			unsettled = fmt.Sprintf(", %d unsettled", t.unsettled)
		}
		fmt.Fprintf(w, "  %s: %d %s, %d refused%s; %d bytes sent, %d received, %d ms in all\n", termsafe.String(node),
			t.n, plural(t.n, "request", "requests"), t.refused, unsettled, t.in, t.out, t.msecs)
	}
	for _, r := range reqs {
		if r.Reason != "" {
			fmt.Fprintf(w, "  refused  %s %s %s: %s\n", termsafe.String(r.Node), termsafe.String(r.Method), termsafe.String(r.Path), termsafe.String(r.Reason))
		}
		if r.Unsettled {
			fmt.Fprintf(w, "  unsettled  %s %s %s: ended without the provider's final usage; counted at its reservation, %s tokens\n",
				termsafe.String(r.Node), termsafe.String(r.Method), termsafe.String(r.Path), humanize.Comma(r.InputTokens+r.OutputTokens+r.CacheWriteTokens))
		}
	}
	return nil
}

// Telemetry is the view of `kewplan telemetry`.
type Telemetry interface {
	Totals(runner string, t runners.RunTotals) error
}

// NewTelemetry returns telemetry's view: a table, or the totals as JSON.
func NewTelemetry(vt ViewType, s Streams) Telemetry { return &telemetryView{NewView(s), vt} }

type telemetryView struct {
	*View
	vt ViewType
}

func (v *telemetryView) Totals(runner string, t runners.RunTotals) error {
	if v.vt == viewJSON {
		return writeTelemetryJSON(v.streams.Stdout, t)
	}
	return writeTelemetry(v.streams.Stdout, runner, t)
}

// Diff is the view of `kewplan diff`.
type Diff interface {
	Diff(d *plandiff.Diff) error
}

// NewDiff returns diff's view for format (one of diffFormatNames); opts.Color is taken from the streams.
func NewDiff(format string, s Streams, opts DiffOptions) (Diff, error) {
	render, ok := diffFormats[format]
	if !ok {
		return nil, fmt.Errorf("unknown --format %q: use one of %s", format, strings.Join(diffFormatNames(), ", "))
	}
	opts.Color = s.Color
	return &diffView{View: NewView(s), render: render, opts: opts}, nil
}

type diffView struct {
	*View
	render diffRenderer
	opts   DiffOptions
}

func (v *diffView) Diff(d *plandiff.Diff) error {
	return buffered(v.streams.Stdout, func(w io.Writer) error { return v.render(w, d, v.opts) })
}

// Fmt is the view of `kewplan fmt`.
type Fmt interface {
	Diagnostics(diags hcl.Diagnostics, files ...map[string][]byte)
	// Formatted writes formatted standard input back.
	Formatted(out []byte)
	// Changed names a file that was (or, with --check, would be) rewritten.
	Changed(name string)
	// FileDiff writes a unified diff of a file's formatting.
	FileDiff(name string, before, after []byte)
}

// NewFmt returns fmt's view.
func NewFmt(s Streams) Fmt { return &fmtView{NewView(s)} }

type fmtView struct{ *View }

func (v *fmtView) Formatted(out []byte) { v.streams.Stdout.Write(out) }
func (v *fmtView) Changed(name string)  { fmt.Fprintln(v.streams.Stdout, name) }
func (v *fmtView) FileDiff(name string, before, after []byte) {
	v.streams.Stdout.Write(diff.Diff(name, before, name+" (formatted)", after))
}
