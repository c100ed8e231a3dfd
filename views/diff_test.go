package views

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/internal/testtools/golden"
	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/plandiff"
	"github.com/kewplan/kewplan/planner"
)

// planDir plans the configuration in dir the way `kewplan plan --json` does and returns the document, after a
// JSON round trip, so that the diff reads exactly what it would read from a file.
func planDir(t *testing.T, dir string) *jsonplan.Document {
	t.Helper()
	cfg, diags := config.Load(dir)
	if diags.HasErrors() {
		t.Fatalf("config.Load(%s): %v", dir, diags)
	}
	vars, diags := cfg.ResolveVariables(config.VariableInputs{})
	if diags.HasErrors() {
		t.Fatalf("ResolveVariables(%s): %v", dir, diags)
	}
	p, _ := planner.Build(cfg, planner.Inputs{Vars: vars, FS: config.DirFS(cfg.Dir)})
	if p.HasErrors() {
		t.Fatalf("planner.Build(%s): %v", dir, p.Diagnostics)
	}
	var buf bytes.Buffer
	if err := WritePlanJSON(&buf, jsonplan.NewDocument(p, "test", cfg.Files)); err != nil {
		t.Fatal(err)
	}
	doc, err := plandiff.DecodePlan(buf.Bytes(), dir)
	if err != nil {
		t.Fatalf("DecodePlan(%s): %v", dir, err)
	}
	// The digest's algorithm is the planner's business; these goldens are about the diff.
	doc.ConfigDigest = "sha256:" + filepath.ToSlash(dir)
	return doc
}

// diffCase compares testdata/<name>/base with testdata/<name>/head.
func diffCase(t *testing.T, name string) *plandiff.Diff {
	t.Helper()
	dir := filepath.Join("testdata", name)
	base := planDir(t, filepath.Join(dir, "base"))
	head := planDir(t, filepath.Join(dir, "head"))
	return plandiff.Compare("base.json", base, "head.json", head)
}

var diffCases = []struct {
	name    string
	verdict string
	// kinds are the exposure delta's finding kinds, in order.
	kinds []string
}{
	{"diff-widen-credential", verdictWidened, []string{plandiff.KindCredentialAdded}},
	{"diff-widen-network", verdictWidened, []string{plandiff.KindCredentialModeWidened, plandiff.KindCredentialModeWidened, plandiff.KindNetworkOpened, plandiff.KindProviderFetchWidened, plandiff.KindNetworkOpened}},
	{"diff-widen-new-runner", verdictWidened, []string{plandiff.KindCredentialAdded, plandiff.KindProviderFetchWidened, plandiff.KindPushWidened}},
	{"diff-widen-image", verdictWidened, []string{plandiff.KindImageUnpinned}},
	{"diff-widen-hardening", verdictWidened, []string{
		plandiff.KindHardeningLost, plandiff.KindHardeningLost, plandiff.KindHardeningLost,
		plandiff.KindHardeningLost, plandiff.KindHardeningLost, plandiff.KindHardeningLost,
	}},
	{"diff-narrow", verdictNarrowed, []string{
		plandiff.KindCredentialRemoved, plandiff.KindCredentialRemoved, plandiff.KindCredentialModeNarrowed, plandiff.KindCredentialModeNarrowed,
		plandiff.KindHardeningGained, plandiff.KindHardeningGained, plandiff.KindImagePinned, plandiff.KindNetworkClosed,
		plandiff.KindProviderFetchNarrowed, plandiff.KindCredentialRemoved, plandiff.KindHardeningGained, plandiff.KindHardeningGained, plandiff.KindNetworkClosed,
	}},
	{"diff-reorder", verdictUnchanged, nil},
	{"diff-widen-runtime", verdictWidened, []string{
		plandiff.KindCredentialAdded, plandiff.KindCredentialAdded, plandiff.KindEgressAdded, plandiff.KindPushWidened,
		plandiff.KindRuntimeWidened, plandiff.KindRuntimeWidened,
	}},
	{"diff-widen-push", verdictWidened, []string{
		plandiff.KindPushWidened, plandiff.KindCredentialAdded, plandiff.KindCredentialAdded, plandiff.KindEgressAdded,
		plandiff.KindPushWidened, plandiff.KindPushWidened, plandiff.KindPushWidened,
	}},
	{"diff-narrow-runtime", verdictNarrowed, []string{plandiff.KindRuntimeNarrowed, plandiff.KindRuntimeNarrowed}},
	{"diff-widen-budget", verdictWidened, []string{
		plandiff.KindBudgetRaised, plandiff.KindBudgetRaised, plandiff.KindBudgetRaised, plandiff.KindBudgetRaised,
	}},
	{"diff-narrow-budget", verdictNarrowed, []string{
		plandiff.KindBudgetLowered, plandiff.KindBudgetLowered, plandiff.KindBudgetLowered, plandiff.KindBudgetLowered,
	}},
}

// TestDiffGolden renders every format for configuration pairs that widen, narrow, and only reorder.
func TestDiffGolden(t *testing.T) {
	for _, tc := range diffCases {
		t.Run(tc.name, func(t *testing.T) {
			d := diffCase(t, tc.name)
			if got := diffVerdict(d); got != tc.verdict {
				t.Errorf("DiffVerdict() = %q, want %q", got, tc.verdict)
			}
			var kinds []string
			for _, f := range d.Exposure {
				kinds = append(kinds, f.Kind)
			}
			if diff := cmp.Diff(tc.kinds, kinds); diff != "" {
				t.Errorf("exposure delta kinds mismatch (-want +got):\n%s", diff)
			}
			dir := filepath.Join("testdata", tc.name)
			// Ranges name files relative to HEAD's configuration directory; SARIF wants them relative to the
			// working directory, as kewplan diff maps them (from the plan's config_dir or config_path).
			headPath := func(name string) string {
				if name == "" || name == "." { // a finding about the whole apply, located at no file
					return name
				}
				return filepath.Join(dir, "head", filepath.FromSlash(name))
			}
			opts := DiffOptions{KewplanVersion: "test", Source: func(name string) ([]byte, bool) {
				src, err := os.ReadFile(headPath(name))
				return src, err == nil
			}, URI: func(name string) string { return SARIFRelativeURI(filepath.ToSlash(headPath(name))) }}
			for format, file := range map[string]string{"human": "diff.txt", "json": "diff.json", "markdown": "diff.md", "sarif": "diff.sarif"} {
				var buf bytes.Buffer
				if err := diffFormats[format](&buf, d, opts); err != nil {
					t.Fatalf("%s: %v", format, err)
				}
				golden.Check(t, filepath.Join(dir, file), buf.Bytes())
				if format == "sarif" {
					checkSARIF(t, buf.Bytes())
				}
			}
		})
	}
}

func TestDiffReorderIsEmpty(t *testing.T) {
	d := diffCase(t, "diff-reorder")
	if !d.Empty() {
		t.Errorf("a pure reorder must produce an empty diff, got %+v", d)
	}
	var buf bytes.Buffer
	if err := writeDiffSARIF(&buf, d, DiffOptions{}); err != nil {
		t.Fatal(err)
	}
	var log sarifLog
	if err := json.Unmarshal(buf.Bytes(), &log); err != nil {
		t.Fatal(err)
	}
	if n := len(log.Runs[0].Results); n != 0 {
		t.Errorf("SARIF of an empty diff has %d results, want 0", n)
	}
}

func TestDiffHumanEscapesControlCharacters(t *testing.T) {
	d := &plandiff.Diff{
		Base: plandiff.Side{Name: "base.json"}, Head: plandiff.Side{Name: "head.json"},
		Exposure: []plandiff.Finding{{Kind: plandiff.KindCredentialAdded, Widening: true, Node: "x",
			Message: "K reaches \x1b[2J\x1b[32mnothing\u202e to see"}},
	}
	var buf bytes.Buffer
	if err := writeDiffHuman(&buf, d, DiffOptions{}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.ContainsAny(out, "\x1b\u202e") {
		t.Errorf("human diff passes control characters through:\n%q", out)
	}
	if !strings.Contains(out, `\x1b[2J`) {
		t.Errorf("human diff should show the escape visibly:\n%s", out)
	}
}

func TestDiffArgvLines(t *testing.T) {
	edits := []plandiff.WordEdit{
		{Op: " ", Word: "docker"}, {Op: " ", Word: "run"}, {Op: " ", Word: "--rm"},
		{Op: " ", Word: "--pids-limit"}, {Op: "-", Word: "512"}, {Op: "+", Word: "4096"},
		{Op: "-", Word: "--memory"}, {Op: "-", Word: "4g"},
		{Op: " ", Word: "-e"}, {Op: " ", Word: "K"},
		{Op: "+", Word: "-e"}, {Op: "+", Word: "L"},
		{Op: "-", Word: "img:1"}, {Op: "+", Word: "img:2"},
		{Op: " ", Word: "--model"}, {Op: " ", Word: "m x"},
	}
	want := []diffArgvLine{
		{" ", "docker run"}, {" ", "--rm"},
		{"-", "--pids-limit 512"}, {"+", "--pids-limit 4096"},
		{"-", "--memory 4g"},
		{" ", "-e K"},
		{"+", "-e L"},
		{"-", "img:1"}, {"+", "img:2"},
		{" ", "--model 'm x'"},
	}
	if diff := cmp.Diff(want, diffArgvLines(edits)); diff != "" {
		t.Errorf("DiffArgvLines() mismatch (-want +got):\n%s", diff)
	}
	hunks := diffArgvHunks(want, 1)
	wantHunks := []diffArgvLine{
		{" ", "..."}, {" ", "--rm"},
		{"-", "--pids-limit 512"}, {"+", "--pids-limit 4096"}, {"-", "--memory 4g"}, {" ", "-e K"}, {"+", "-e L"},
		{"-", "img:1"}, {"+", "img:2"}, {" ", "--model 'm x'"},
	}
	if diff := cmp.Diff(wantHunks, hunks); diff != "" {
		t.Errorf("DiffArgvHunks() mismatch (-want +got):\n%s", diff)
	}
}
