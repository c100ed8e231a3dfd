package views

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/kewplan/kewplan/internal/termsafe"
	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/planner"
)

// planFormat picks the renderer of a plan --format (plan and show); sarif gets the command's SARIF options (the
// artifact URIs: ranges name files relative to the configuration's directory, SARIF wants repository paths).
func planFormat(format string, sarif SARIFOptions) (planRenderer, error) {
	render, ok := planFormats[format]
	if !ok {
		return nil, fmt.Errorf("unknown --format %q: use one of %s", format, strings.Join(planFormatNames(), ", "))
	}
	if format == "sarif" {
		render = func(w io.Writer, doc *jsonplan.Document) error {
			opts := sarif
			if opts.KewplanVersion == "" {
				opts.KewplanVersion = doc.KewplanVersion
			}
			return writePlanSARIF(w, doc, opts)
		}
	}
	return render, nil
}

// Plan is the view of `kewplan plan`: the plan in its --format, and where it was saved.
type Plan interface {
	Diagnostics(diags hcl.Diagnostics, files ...map[string][]byte)
	Plan(doc *jsonplan.Document) error
	// Manifests writes the Kubernetes manifests of `plan --engine kubernetes --format yaml`, verbatim (as render's
	// YAML: they are for kubectl, and escaping would change them).
	Manifests(data []byte) error
	// Saved says where the plan was saved and how to apply it; NotSaved why it was not.
	Saved(path string)
	NotSaved(path string)
}

// NewPlan returns plan's view for format (one of planFormatNames). A human plan is followed on stdout by where it
// was saved; any other format keeps stdout a single document and says it on stderr. sarif is used by the sarif
// format only.
func NewPlan(format string, s Streams, sarif SARIFOptions) (Plan, error) {
	if format == PlanFormatYAML {
		return &planView{View: NewView(s), notes: s.Stderr}, nil
	}
	render, err := planFormat(format, sarif)
	if err != nil {
		return nil, err
	}
	v := &planView{View: NewView(s), render: render, notes: s.Stdout}
	if format != "human" {
		v.notes = s.Stderr // keep stdout a single document
	}
	return v, nil
}

type planView struct {
	*View
	render planRenderer
	notes  io.Writer
}

func (v *planView) Plan(doc *jsonplan.Document) error {
	if v.render == nil {
		return fmt.Errorf("--format %s prints manifests, not the plan document", PlanFormatYAML)
	}
	return buffered(v.streams.Stdout, func(w io.Writer) error { return v.render(w, doc) })
}

// buffered runs write on a buffer in front of w and flushes it, even after an error (what was written before
// it stays written). A plan document of 10,000 nodes is hundreds of thousands of short writes, each a system
// call on an unbuffered stream.
func buffered(w io.Writer, write func(io.Writer) error) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	err := write(bw)
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	return err
}

func (v *planView) Manifests(data []byte) error {
	_, err := v.streams.Stdout.Write(data)
	return err
}

// PlanFormatYAML is plan's --format for the Kubernetes manifests themselves (not a format of show: a plan document
// holds the objects' summary, not the objects).
const PlanFormatYAML = "yaml"

func (v *planView) Saved(path string) {
	fmt.Fprintf(v.notes, "\nSaved the plan to %s. Review it, then run: kewplan apply %s\n", termsafe.String(path), termsafe.String(planner.ShellQuote(path)))
}

func (v *planView) NotSaved(path string) {
	fmt.Fprintf(v.streams.Stderr, "The plan has errors, so it was not saved to %s.\n", termsafe.String(path))
}

// Show is the view of `kewplan show`: a plan file in its --format, and why a saved plan is stale.
type Show interface {
	Plan(doc *jsonplan.Document) error
	Stale(err error)
}

// NewShow returns show's view for format (one of planFormatNames); sarif as for NewPlan.
func NewShow(format string, s Streams, sarif SARIFOptions) (Show, error) {
	render, err := planFormat(format, sarif)
	if err != nil {
		return nil, err
	}
	return &showView{View: NewView(s), render: render}, nil
}

type showView struct {
	*View
	render planRenderer
}

func (v *showView) Plan(doc *jsonplan.Document) error {
	return buffered(v.streams.Stdout, func(w io.Writer) error { return v.render(w, doc) })
}
func (v *showView) Stale(err error) { v.Error(err) }

// Graph is the view of `kewplan graph`: the dispatch graph as Graphviz DOT, the errors beside it.
type Graph interface {
	Diagnostics(diags hcl.Diagnostics, files ...map[string][]byte)
	Graph(doc *jsonplan.Document) error
}

// NewGraph returns graph's view.
func NewGraph(s Streams) Graph { return &graphView{NewView(s)} }

type graphView struct{ *View }

func (v *graphView) Graph(doc *jsonplan.Document) error {
	return buffered(v.streams.Stdout, func(w io.Writer) error { return WriteGraphDOT(w, doc) })
}

// Validate is the view of `kewplan validate`.
type Validate interface {
	// Results reports the configuration's diagnostics and whether it is valid.
	Results(diags hcl.Diagnostics, files ...map[string][]byte) (valid bool, err error)
}

// NewValidate returns validate's view: human (diagnostics on stderr, a verdict on stdout) or JSON (Terraform's
// validate -json document on stdout).
func NewValidate(vt ViewType, s Streams) Validate {
	if vt == viewJSON {
		return &validateJSONView{NewView(s)}
	}
	return &validateHuman{NewView(s)}
}

type validateHuman struct{ *View }

func (v *validateHuman) Results(diags hcl.Diagnostics, files ...map[string][]byte) (bool, error) {
	v.Diagnostics(diags, files...)
	switch {
	case diags.HasErrors():
		return false, nil
	case len(diags) > 0:
		fmt.Fprintln(v.streams.Stdout, "\nSuccess! The configuration is valid, but there were warnings as shown above.")
	default:
		fmt.Fprintln(v.streams.Stdout, "Success! The configuration is valid.")
	}
	return true, nil
}

type validateJSONView struct{ *View }

func (v *validateJSONView) Results(diags hcl.Diagnostics, files ...map[string][]byte) (bool, error) {
	doc := newValidateJSON(diags, files...)
	if err := writeValidateJSON(v.streams.Stdout, doc); err != nil {
		return false, err
	}
	return doc.Valid, nil
}
