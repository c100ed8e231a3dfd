package planfile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"

	"github.com/hashicorp/hcl/v2"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/internal/termsafe"
	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/k8srender"
	"github.com/kewplan/kewplan/planner"
)

// freshDocument is the document kewplan plan would write for p now, on the engine the plan file names: what a
// plan file must hold, field for field, for what show displays to be what apply runs.
func freshDocument(doc *jsonplan.Document, cfg *config.Config, p *planner.Plan) (*jsonplan.Document, hcl.Diagnostics) {
	fresh := jsonplan.NewDocument(p, doc.KewplanVersion)
	fresh.Engine = doc.Engine
	var diags hcl.Diagnostics
	if doc.EngineName() == config.EngineKubernetes {
		if b := cfg.Engine(config.EngineKubernetes); b != nil && b.Kubernetes != nil {
			m, d := k8srender.Render(p, k8srender.Options{Engine: b.Kubernetes})
			fresh.SetEngine(doc.Engine, m, b.Kubernetes)
			for _, x := range d {
				if x.Summary != k8srender.SummaryNodeNotRendered { // as kewplan plan adds them
					diags = append(diags, x)
				}
			}
		}
	}
	return fresh, diags
}

// compareDocuments compares a plan file with the document its configuration plans now, every field but what is by
// nature of the moment it was written: the saved object (checked by CheckStale and CheckIntegrity), the resume
// decisions (made by apply), the configuration's directory relative to where plan ran, the format and kewplan
// versions, and the diagnostics' snippets. A diagnostic the configuration raises must be in the file (the file
// may hold more: the configuration's load warnings, which a re-plan does not repeat). The error wraps ErrMismatch
// and names the first field that differs.
func compareDocuments(doc, fresh *jsonplan.Document, extra hcl.Diagnostics) error {
	mismatch := func(what string) error {
		return fmt.Errorf("%w its configuration: %s, so the plan file was edited. Do not apply it; run kewplan plan again and review the new plan",
			ErrMismatch, what)
	}
	if len(doc.Nodes) != len(fresh.Nodes) {
		return mismatch(fmt.Sprintf("it holds %d nodes, and the configuration plans %d", len(doc.Nodes), len(fresh.Nodes)))
	}
	for i := range doc.Nodes {
		if path, ok := firstDifference(&doc.Nodes[i], &fresh.Nodes[i]); !ok {
			return mismatch(fmt.Sprintf("node %s has a %s the configuration does not plan", termsafe.String(strconv.Quote(fresh.Nodes[i].Name)), path))
		}
	}
	a, b := comparable(doc), comparable(fresh)
	if path, ok := firstDifference(a, b); !ok {
		return mismatch(fmt.Sprintf("its %s differs from what the configuration plans", path))
	}
	have := map[string]int{}
	for _, d := range doc.Diagnostics {
		have[diagnosticKey(d)]++
	}
	want := append(jsonplan.Diagnostics{}, fresh.Diagnostics...)
	want = append(want, jsonplan.NewDiagnostics(extra)...)
	for _, d := range want {
		k := diagnosticKey(d)
		if have[k] == 0 {
			return mismatch(fmt.Sprintf("the configuration raises the %s %s, which the plan file does not hold", d.Severity,
				termsafe.String(strconv.Quote(d.Summary))))
		}
		have[k]--
	}
	return nil
}

// comparable is the part of a document compareDocuments compares field by field (the nodes are compared apart).
func comparable(d *jsonplan.Document) *jsonplan.Document {
	c := *d
	c.Nodes, c.Diagnostics, c.Saved, c.Resume = nil, nil, nil, nil
	c.ConfigDir, c.FormatVersion, c.KewplanVersion = "", "", ""
	return &c
}

// diagnosticKey identifies a diagnostic without its snippet, which is the source the config digest covers.
func diagnosticKey(d jsonplan.Diagnostic) string {
	d.Snippet = nil
	b, _ := json.Marshal(d) // strings, numbers and a range always encode
	return string(b)
}

// firstDifference reports whether a and b encode alike and, when they do not, the path of the first field that
// differs ("budget.max_usd", "argv[3]"), escaped for a terminal: the plan file's keys are not trusted.
func firstDifference(a, b any) (string, bool) {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	if err1 == nil && err2 == nil && bytes.Equal(ja, jb) {
		return "", true
	}
	var va, vb any
	_ = json.Unmarshal(ja, &va)
	_ = json.Unmarshal(jb, &vb)
	path := differingPath(va, vb, "")
	if path == "" {
		path = "content"
	}
	return termsafe.String(path), false
}

func differingPath(a, b any, at string) string {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			return at
		}
		keys := make([]string, 0, len(x)+len(y))
		for k := range x {
			keys = append(keys, k)
		}
		for k := range y {
			if _, dup := x[k]; !dup {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			next := k
			if at != "" {
				next = at + "." + k
			}
			xv, inX := x[k]
			yv, inY := y[k]
			if inX != inY {
				return next
			}
			if p := differingPath(xv, yv, next); p != "" {
				return p
			}
		}
		return ""
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return at
		}
		for i := range x {
			if p := differingPath(x[i], y[i], at+"["+strconv.Itoa(i)+"]"); p != "" {
				return p
			}
		}
		return ""
	default:
		if !reflect.DeepEqual(a, b) {
			if at == "" {
				return "value"
			}
			return at
		}
		return ""
	}
}
