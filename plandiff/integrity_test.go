package plandiff

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kewplan/kewplan/jsonplan"
)

// TestCheckDocumentGenuine: every plan the planner's goldens hold reads as consistent with itself.
func TestCheckDocumentGenuine(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "planner", "testdata", "*", "plan.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no planner goldens: %v", err)
	}
	for _, name := range files {
		var doc jsonplan.Document
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := CheckDocument(&doc); len(got) != 0 {
			t.Errorf("CheckDocument(%s) = %q, want nothing", name, got)
		}
	}
}

// TestCheckDocumentTampered: hand edits to a saved plan are named, one sentence each.
func TestCheckDocumentTampered(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "planner", "testdata", "basic", "plan.json"))
	if err != nil {
		t.Fatal(err)
	}
	load := func() *jsonplan.Document {
		var doc jsonplan.Document
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		return &doc
	}
	insert := func(argv []string, at int, words ...string) []string {
		return append(append(append([]string{}, argv[:at]...), words...), argv[at:]...)
	}
	tests := []struct {
		name string
		edit func(d *jsonplan.Document)
		want []string
	}{
		{"privileged", func(d *jsonplan.Document) { d.Nodes[0].Argv = insert(d.Nodes[0].Argv, 2, "--privileged") },
			[]string{"--privileged added"}},
		{"image in argv", func(d *jsonplan.Document) {
			a := d.Nodes[0].Argv
			for i, w := range a {
				if w == d.Nodes[0].Image {
					a[i] = "evil/agent:latest"
				}
			}
		}, []string{"its argv runs image evil/agent:latest, the plan says"}},
		{"credential in argv only", func(d *jsonplan.Document) {
			d.Nodes[0].Argv = insert(d.Nodes[0].Argv, 2, "-e", "GITHUB_TOKEN")
		}, []string{"its argv forwards", "GITHUB_TOKEN"}},
		{"credential everywhere but the exposure", func(d *jsonplan.Document) {
			n := &d.Nodes[0]
			n.Argv = insert(n.Argv, 2, "-e", "AWS_SECRET_ACCESS_KEY")
			n.Credentials = append(n.Credentials, "AWS_SECRET_ACCESS_KEY")
		}, []string{"the exposure table says AWS_SECRET_ACCESS_KEY reaches none"}},
		{"cap-drop removed", func(d *jsonplan.Document) {
			a := d.Nodes[0].Argv
			for i := range a {
				if a[i] == "--cap-drop" {
					d.Nodes[0].Argv = append(append([]string{}, a[:i]...), a[i+2:]...)
					break
				}
			}
		}, []string{"no --cap-drop ALL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := load()
			if len(d.Nodes) == 0 || len(d.Nodes[0].Argv) == 0 {
				t.Fatal("the basic golden has no argv")
			}
			tt.edit(d)
			got := strings.Join(CheckDocument(d), "\n")
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("CheckDocument() = %q, want it to mention %q", got, w)
				}
			}
		})
	}
	if diff := cmp.Diff([]string(nil), CheckDocument(load())); diff != "" {
		t.Errorf("CheckDocument(untouched) mismatch (-want +got):\n%s", diff)
	}
}
