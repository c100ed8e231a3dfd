package views

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"

	"github.com/kewplan/kewplan/internal/testtools/golden"
	"github.com/kewplan/kewplan/planner"
)

const diagSource = `sandbox {
	memory = "4g"
}

runner "acme" {
  credentials = ["sk-ant-api03-secretvalue"]
}

node "fix" {
  runner = "claude-code"
  modle  = "claude-sonnet-4-5"
  prompt = "Réparer ${node.fix.comit}"
}
`

// rangeOf finds the first occurrence of needle in diagSource, for test ranges that cannot drift.
func rangeOf(t *testing.T, needle string) *hcl.Range {
	t.Helper()
	i := strings.Index(diagSource, needle)
	if i < 0 {
		t.Fatalf("%q not in the source", needle)
	}
	pos := func(off int) hcl.Pos {
		line := 1 + strings.Count(diagSource[:off], "\n")
		lineStart := strings.LastIndex(diagSource[:off], "\n") + 1
		return hcl.Pos{Line: line, Column: 1 + len([]rune(diagSource[lineStart:off])), Byte: off}
	}
	return &hcl.Range{Filename: "main.hcl", Start: pos(i), End: pos(i + len(needle))}
}

type ruleRef string

func (r ruleRef) RuleID() string { return string(r) }

func testDiagnostics(t *testing.T) hcl.Diagnostics {
	return hcl.Diagnostics{
		{Severity: hcl.DiagError, Summary: "Configuration not found", Detail: "The path nowhere does not exist. Give the path of a .hcl file, or of a directory holding .hcl files."},
		{Severity: hcl.DiagError, Summary: "Unsupported argument", Subject: rangeOf(t, "modle"),
			Detail: `An argument named "modle" is not expected in a node block. Did you mean "model"? The arguments it accepts are "runner", "role", "model", "repo", "ref", "branch", "prompt", "timeout" and "depends_on".`},
		{Severity: hcl.DiagError, Summary: "Unsupported node output", Subject: rangeOf(t, "node.fix.comit"),
			Detail: `A node has no output "comit". Did you mean "commit"?`},
		{Severity: hcl.DiagWarning, Summary: "No memory limit", Subject: rangeOf(t, "sandbox"), Extra: ruleRef("no-memory-limit"),
			Detail: "The sandbox sets no memory limit.\n\nSet memory in the sandbox block."},
		{Severity: hcl.DiagError, Summary: "Credential is not a bare environment name", Subject: rangeOf(t, `"sk-ant-api03-secretvalue"`),
			Extra: ruleRef(planner.RuleCredentialByValue), Detail: "A credential entry of runner \"acme\" is not a name. Write only the variable's name."},
		{Severity: hcl.DiagError, Summary: "Multi-line range", Subject: rangeOf(t, "runner \"acme\" {\n  credentials"),
			Detail: "The span covers two lines."},
		{Severity: hcl.DiagError, Summary: "Tab-indented", Subject: rangeOf(t, `"4g"`), Detail: "Carets line up under a tab."},
		{Severity: hcl.DiagError, Summary: "Range outside the source", Subject: &hcl.Range{Filename: "main.hcl", Start: hcl.Pos{Line: 90, Column: 1, Byte: 9000}, End: hcl.Pos{Line: 90, Column: 2, Byte: 9001}},
			Detail: "No snippet is shown rather than a wrong one."},
		{Severity: hcl.DiagError, Summary: "Unknown file", Subject: &hcl.Range{Filename: "other.hcl", Start: hcl.Pos{Line: 3, Column: 1, Byte: 20}, End: hcl.Pos{Line: 3, Column: 4, Byte: 23}},
			Detail: "The location is still given."},
	}
}

func TestWriteDiagnostics(t *testing.T) {
	files := map[string][]byte{"main.hcl": []byte(diagSource)}
	for _, tc := range []struct {
		name  string
		color bool
	}{{"diagnostics.golden", false}, {"diagnostics-color.golden", true}} {
		var buf bytes.Buffer
		if err := writeDiagnostics(&buf, testDiagnostics(t), tc.color, files); err != nil {
			t.Fatal(err)
		}
		golden.Check(t, filepath.Join("testdata", tc.name), buf.Bytes())
		if strings.Contains(buf.String(), "secretvalue") {
			t.Errorf("%s: a credential value was printed", tc.name)
		}
		if !tc.color && strings.Contains(buf.String(), "\x1b[") {
			t.Errorf("%s: colour without being asked", tc.name)
		}
	}
}

func TestValidateJSON(t *testing.T) {
	files := map[string][]byte{"main.hcl": []byte(diagSource)}
	doc := newValidateJSON(testDiagnostics(t), files)
	if doc.Valid || doc.ErrorCount != 8 || doc.WarningCount != 1 {
		t.Errorf("valid=%v errors=%d warnings=%d, want false 8 1", doc.Valid, doc.ErrorCount, doc.WarningCount)
	}
	var buf bytes.Buffer
	if err := writeValidateJSON(&buf, doc); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "diagnostics.json.golden"), buf.Bytes())
	if strings.Contains(buf.String(), "secretvalue") {
		t.Error("a credential value was printed")
	}
	// The document reads back into the same shape, which `kewplan show` and `kewplan diff` rely on.
	var back validateJSON
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(doc, &back); diff != "" {
		t.Errorf("round trip mismatch (-want +got):\n%s", diff)
	}

	empty := newValidateJSON(nil)
	buf.Reset()
	if err := writeValidateJSON(&buf, empty); err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"format_version\": \"1.0\",\n  \"valid\": true,\n  \"error_count\": 0,\n  \"warning_count\": 0,\n  \"diagnostics\": []\n}\n"
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("empty document mismatch (-want +got):\n%s", diff)
	}
}
