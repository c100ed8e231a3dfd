package planner_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/planner"
)

// expectRE finds the expected diagnostics written inline, Terraform internal/configs style: `# ERROR: <summary>`
// on the line where the diagnostic's range starts.
var expectRE = regexp.MustCompile(`# (ERROR|WARNING): ([^#\n]*[^#\s])`)

// TestInstanceErrors loads and plans each testdata/instance-errors/*.hcl the way `kewplan plan` does and
// compares every diagnostic (file:line, severity, summary) with the file's `# ERROR:` comments.
func TestInstanceErrors(t *testing.T) {
	files, _ := filepath.Glob("testdata/instance-errors/*.hcl")
	if len(files) == 0 {
		t.Fatal("no fixtures")
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".hcl"), func(t *testing.T) {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			sc := bufio.NewScanner(bytes.NewReader(src))
			for line := 1; sc.Scan(); line++ {
				for _, m := range expectRE.FindAllSubmatch(sc.Bytes(), -1) {
					want = append(want, fmt.Sprintf("%d: %s: %s", line, m[1], m[2]))
				}
			}
			diags := planFile(t, f)
			var got []string
			for _, d := range diags {
				sev := "ERROR"
				if d.Severity == hcl.DiagWarning {
					sev = "WARNING"
				}
				line := 0
				if d.Subject != nil {
					line = d.Subject.Start.Line
				}
				if strings.HasSuffix(d.Summary, ".") || d.Detail == "" || !strings.HasSuffix(d.Detail, ".") {
					t.Errorf("%s: not house style (summary without full stop, detail of whole sentences): %q", d.Summary, d.Detail)
				}
				got = append(got, fmt.Sprintf("%d: %s: %s", line, sev, d.Summary))
			}
			sort.Strings(want)
			sort.Strings(got)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("diagnostics mismatch (-want +got):\n%s\nall:\n%s", diff, diags.Error())
			}
		})
	}
}

// planFile is `kewplan plan FILE`: the diagnostics of loading, resolving variables and planning.
func planFile(t *testing.T, path string) hcl.Diagnostics {
	t.Helper()
	cfg, diags := config.Load(path)
	if diags.HasErrors() {
		return diags
	}
	vars, d := cfg.ResolveVariables(config.VariableInputs{})
	if d.HasErrors() {
		return d
	}
	_, d = planner.Build(cfg, planner.Inputs{Vars: vars, FS: os.DirFS(cfg.Dir)})
	return d
}
