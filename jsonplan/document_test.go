package jsonplan

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"

	"github.com/kewplan/kewplan/k8srender"
	"github.com/kewplan/kewplan/planner"
)

// A document decoded and written again is the same bytes, and its diagnostics and kubernetes object keep
// encoding/json.Marshal's HTML escapes, the bytes plans held when those fields were raw.
func TestDocumentRoundTrip(t *testing.T) {
	p := &planner.Plan{ConfigDigest: "sha256:0", Exposure: map[string][]string{}, Diagnostics: hcl.Diagnostics{
		{Severity: hcl.DiagWarning, Summary: "Pin <image>", Detail: "name:tag@sha256:<digest> & more"}}}
	doc := NewDocument(p, "test")
	doc.Engine = "kubernetes"
	doc.Kubernetes = &Kubernetes{PlanDocument: k8srender.PlanDocument{Namespace: "a<b>", Differences: []k8srender.Difference{{ID: "x&y"}}}}
	var first bytes.Buffer
	if err := doc.WriteIndented(&first); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`Pin \u003cimage\u003e`, `\u0026 more`, `"namespace": "a\u003cb\u003e"`, `"id": "x\u0026y"`} {
		if !strings.Contains(first.String(), want) {
			t.Errorf("document lacks %s:\n%s", want, first.String())
		}
	}
	back, err := Decode(first.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	if err := back.WriteIndented(&again); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(first.String(), again.String()); diff != "" {
		t.Errorf("decoded and written again mismatch (-want +got):\n%s", diff)
	}
}

// Hand-edited diagnostics and kubernetes objects decode to stand-ins, so the rest of the plan can be shown.
func TestDecodeDamaged(t *testing.T) {
	doc, err := Decode([]byte(`{"format_version": "1.0", "engine": "kubernetes", "kubernetes": {"nodes": 3},
		"nodes": [], "diagnostics": [3, {"severity": "error", "summary": "S", "detail": "D"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Diagnostics) != 2 || !doc.Diagnostics[0].Unreadable || doc.Diagnostics[1].Unreadable || doc.Diagnostics[1].Summary != "S" {
		t.Errorf("diagnostics = %+v", doc.Diagnostics)
	}
	if doc.Kubernetes == nil || doc.Kubernetes.Err() == nil || doc.EngineName() != "kubernetes" {
		t.Errorf("kubernetes = %+v, want a stand-in with an error", doc.Kubernetes)
	}
	var de *DecodeError
	if _, err := Decode([]byte(`{"format_version": "1.0"} {}`)); !errors.As(err, &de) {
		t.Errorf("two values: err = %v, want a DecodeError", err)
	}
	if _, err := Decode([]byte(`{"format_version": "2.0"}`)); err == nil || errors.As(err, &de) {
		t.Errorf("format 2.0: err = %v, want Check's error", err)
	}
	if d := (&Document{}); d.EngineName() != "docker" {
		t.Errorf("a document without engine runs on %q, want docker", d.EngineName())
	}
	var ds Diagnostics
	if err := json.Unmarshal([]byte(`null`), &ds); err != nil || ds != nil {
		t.Errorf("null diagnostics = %v, %v", ds, err)
	}
}
