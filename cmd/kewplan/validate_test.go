package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidateExamples runs `kewplan validate` on every example, the planner's rules included: the examples
// must be valid and warning-free, since newcomers copy them.
func TestValidateExamples(t *testing.T) {
	examples, err := filepath.Glob("../../examples/*.hcl")
	if err != nil || len(examples) < 3 {
		t.Fatalf("found %d examples (%v), want at least 3", len(examples), err)
	}
	for _, ex := range examples {
		t.Run(filepath.Base(ex), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run([]string{"validate", ex}, strings.NewReader(""), &stdout, &stderr)
			if code != 0 || stderr.Len() > 0 || stdout.String() != "Success! The configuration is valid.\n" {
				t.Errorf("kewplan validate %s: exit %d\nstdout:\n%s\nstderr:\n%s", ex, code, stdout.String(), stderr.String())
			}
		})
	}
}
