package planfile_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kewplan/kewplan/planfile"
)

// hostilePlanSeeds are the hostile-input cases as plan documents.
var hostilePlanSeeds = []string{
	`{"format_version":"1.0","nodes":` + strings.Repeat("[", 20000) + `}`,
	`{"format_version":"1.0","saved":{"variables":{"x":` + strings.Repeat(`{"a":`, 600) + `1` + strings.Repeat("}", 600) + `}}}`,
	`{"format_version":"1.0","nodes":[{"name":"fix","model":"m\u001b[2J\u001b]0;PWNED\u0007","argv":["docker","run","\u202eevil"]}]}`,
	"{\"format_version\":\"1.0\",\"nodes\":[{\"name\":\"\xff\xfe\"}]}",
}

// FuzzRead: a plan file from a pull request never panics Read, and nothing it accepts fails
// its own check.
func FuzzRead(f *testing.F) {
	goldens, _ := filepath.Glob("../planner/testdata/*/plan.json")
	for _, g := range goldens {
		if b, err := os.ReadFile(g); err == nil {
			f.Add(b)
		}
	}
	for _, s := range hostilePlanSeeds {
		f.Add([]byte(s))
	}
	name := filepath.Join(f.TempDir(), "fuzz.plan")
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(name, b, 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := planfile.Read(name)
		if err != nil {
			return
		}
		if err := f.Doc.Check(); err != nil {
			t.Fatalf("Read accepted a document its Check refuses: %v", err)
		}
		_, _ = planfile.ReadSaved(name)
		if f.Doc.Saved != nil {
			_, _ = f.Doc.Saved.Vars()
		}
	})
}
