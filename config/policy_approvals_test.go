package config

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParsePolicyApprovals(t *testing.T) {
	src := "policy {\n  approvals {\n    required        = 2\n    allowed_signers = \"signers/allowed\"\n    when            = \"widening\"\n  }\n}\n"
	p, diags := ParsePolicy([]byte(src), filepath.Join("org", "policy.hcl"))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	a := p.Approvals
	got := []any{a.Required, a.AllowedSigners, a.AllowedSignersPath, a.When, a.DeclRange.Start.Line}
	want := []any{2, "signers/allowed", filepath.Join("org", "signers", "allowed"), ApprovalsWidening, 2}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Approvals mismatch (-want +got):\n%s", d)
	}
	p, diags = ParsePolicy([]byte("policy {\n  approvals {\n    required = 1\n    allowed_signers = \"/etc/kewplan/signers\"\n  }\n}\n"), "p.hcl")
	if diags.HasErrors() || p.Approvals.When != ApprovalsAlways || p.Approvals.AllowedSignersPath != "/etc/kewplan/signers" {
		t.Errorf("defaults: %+v %v", p.Approvals, diags)
	}
}

func TestParsePolicyApprovalsErrors(t *testing.T) {
	for _, tc := range []struct{ body, summary, at string }{
		{"required = 0\nallowed_signers = \"s\"", "Invalid number of approvals", "p.hcl:3"},
		{"required = 1.5\nallowed_signers = \"s\"", "Invalid number of approvals", "p.hcl:3"},
		{"required = 1\nallowed_signers = \" s\"", "Invalid allowed_signers path", "p.hcl:4"},
		{"required = 1\nallowed_signers = \"s\"\nwhen = \"sometimes\"", "Invalid approvals condition", "p.hcl:5"},
		{"required = 1\nallowed_signers = var.x", "Policy values must be literals", "p.hcl:4"},
		{"required = 1", "Missing required argument", "p.hcl:2"},
	} {
		src := "policy {\n  approvals {\n" + tc.body + "\n  }\n}\n"
		_, diags := ParsePolicy([]byte(src), "p.hcl")
		if !diags.HasErrors() {
			t.Errorf("%q: no error", tc.body)
			continue
		}
		d := diags[0]
		at := ""
		if d.Subject != nil {
			at = fmt.Sprintf("%s:%d", d.Subject.Filename, d.Subject.Start.Line)
		}
		if d.Summary != tc.summary || at != tc.at {
			t.Errorf("%q: got %q at %s, want %q at %s", tc.body, d.Summary, at, tc.summary, tc.at)
		}
	}
	_, diags := ParsePolicy([]byte("policy {\n  approvals {\n    required = 1\n    allowed_signers = \"a\"\n  }\n  approvals {\n    required = 1\n    allowed_signers = \"b\"\n  }\n}\n"), "p.hcl")
	if !diags.HasErrors() || diags[0].Summary != "Duplicate approvals block" || diags[0].Subject.Start.Line != 6 {
		t.Errorf("duplicate: %v", diags)
	}
}
