package views

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"

	"github.com/kewplan/kewplan/internal/termsafe"
	"github.com/kewplan/kewplan/k8srender"
)

// Render is `kewplan render`'s view: the plan's diagnostics, then the manifests as YAML, a per-node summary, or
// the line saying where they were written.
type Render interface {
	Diagnostics(diags hcl.Diagnostics, files ...map[string][]byte)
	PlanHasErrors()
	YAML(data []byte) error
	Summary(m *k8srender.Manifests) error
	Written(files, objects int, dir string)
}

// NewRender returns render's view.
func NewRender(s Streams) Render { return &renderHuman{NewView(s)} }

type renderHuman struct{ *View }

func (v *renderHuman) PlanHasErrors() {
	fmt.Fprintln(v.streams.Stderr, "The plan has errors, so nothing was rendered.")
}

// YAML writes the manifests verbatim: they are for kubectl, not for a terminal's eyes, and escaping would change
// them. Every string in them came through the planner, which refuses control characters in names and images.
func (v *renderHuman) YAML(data []byte) error {
	_, err := v.streams.Stdout.Write(data)
	return err
}

func (v *renderHuman) Summary(m *k8srender.Manifests) error {
	return writeKubernetesSummary(v.streams.Stdout, m)
}

func (v *renderHuman) Written(files, objects int, dir string) {
	fmt.Fprintf(v.streams.Stdout, "Wrote %s (%s) to %s.\n", count(files, "manifest", "manifests"),
		count(objects, "object", "objects"), termsafe.Flatten(dir))
}
