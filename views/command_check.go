package views

import (
	"fmt"

	"github.com/kewplan/kewplan/executor/conform"
)

// Check is the view of `kewplan smoke` and `kewplan conform`: a report on an image, and the steps on the way.
type Check interface {
	// Progress is told each step of the check; nil when nobody is watching (JSON, or not a terminal).
	Progress() func(step string)
	// Interrupted says the check was cancelled by Ctrl-C and cleaned up after itself.
	Interrupted()
	Smoke(r *conform.SmokeReport) error
	Conform(r *conform.Report) error
}

// NewCheck returns the checks' view: the report for people, or JSON.
func NewCheck(vt ViewType, s Streams) Check { return &checkView{NewView(s), vt} }

type checkView struct {
	*View
	vt ViewType
}

func (v *checkView) Progress() func(string) {
	if v.vt == viewJSON || !v.streams.Terminal {
		return nil
	}
	return func(step string) { fmt.Fprintf(v.streams.Stderr, "kewplan: %s…\n", step) }
}

func (v *checkView) Interrupted() {
	fmt.Fprintln(v.streams.Stderr, "kewplan: interrupted; the check's containers were removed.")
}

func (v *checkView) Smoke(r *conform.SmokeReport) error {
	if v.vt == viewJSON {
		return smokeReportJSON(v.streams.Stdout, r)
	}
	return smokeReportHuman(v.streams.Stdout, r, v.streams.Color)
}

func (v *checkView) Conform(r *conform.Report) error {
	if v.vt == viewJSON {
		return conformReportJSON(v.streams.Stdout, r)
	}
	return conformReportHuman(v.streams.Stdout, r, v.streams.Color)
}
