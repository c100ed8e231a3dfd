package views

import (
	"github.com/hashicorp/hcl/v2"
)

// PolicyCase is the outcome of one *.policytest.hcl case of `kewplan policy test`.
type PolicyCase struct {
	Name string // the file's name without .policytest.hcl
	File string
	// Problems say what differed (a rule expected at a level that did not match there, or the reverse) or why
	// the case could not run; none when it passed.
	Problems []string
}

// PolicyTest is the view of `kewplan policy test`: a line per case as `go test -v` writes them, then the verdict.
type PolicyTest interface {
	Diagnostics(diags hcl.Diagnostics, files ...map[string][]byte)
	Case(c PolicyCase) error
	Summary(dir string, cases, failed int) error
}

// NewPolicyTest returns the view of `kewplan policy test`.
func NewPolicyTest(s Streams) PolicyTest { return &policyTestView{NewView(s)} }

type policyTestView struct{ *View }

func (v *policyTestView) Case(c PolicyCase) error {
	pw := &planWriter{w: v.streams.Stdout}
	if len(c.Problems) == 0 {
		pw.printf("--- PASS: %s\n", c.Name)
		return pw.err
	}
	pw.printf("--- FAIL: %s\n", c.Name)
	for _, p := range c.Problems {
		pw.printf("    %s: %s\n", c.File, p)
	}
	return pw.err
}

func (v *policyTestView) Summary(dir string, cases, failed int) error {
	pw := &planWriter{w: v.streams.Stdout}
	if failed > 0 {
		pw.printf("FAIL\nFAIL\t%s\t%d of %s failed\n", dir, failed, count(cases, "case", "cases"))
	} else {
		pw.printf("PASS\nok\t%s\t%s\n", dir, count(cases, "case", "cases"))
	}
	return pw.err
}
