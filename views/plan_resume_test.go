package views

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kewplan/kewplan/internal/testtools/golden"
	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/planner"
)

// TestPlanResumeSection: a plan applied with --resume says, in every format, which nodes are reused and why
// the others run.
func TestPlanResumeSection(t *testing.T) {
	doc := jsonplan.NewDocument(&planner.Plan{ConfigDigest: "sha256:0"}, "test")
	doc.Resume = jsonplan.NewResumeDocument(&planner.ResumePlan{FromRun: "20261130T100000Z-abc123", Decisions: []planner.ResumeDecision{
		{Node: "implement", Action: planner.ResumeReuse, Reason: "reused from 20261130T100000Z-abc123", FromRun: "20261130T100000Z-abc123"},
		{Node: "fix", Action: planner.ResumeRun, Reason: "failed in 20261130T100000Z-abc123"},
		{Node: "review", Action: planner.ResumeRun, Reason: "upstream fix will run\x1b[2J"},
	}})
	var human, md, js bytes.Buffer
	if err := WritePlanHuman(&human, doc); err != nil {
		t.Fatal(err)
	}
	if err := WritePlanMarkdown(&md, doc); err != nil {
		t.Fatal(err)
	}
	if err := WritePlanJSON(&js, doc); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "plan_resume.golden"), human.Bytes())
	golden.Check(t, filepath.Join("testdata", "plan_resume_md.golden"), md.Bytes())
	golden.Check(t, filepath.Join("testdata", "plan_resume_json.golden"), js.Bytes())
	if strings.Contains(human.String(), "\x1b") {
		t.Error("a control character reached the terminal")
	}
}
