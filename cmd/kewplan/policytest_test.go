package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestExamplePolicy runs the tests of the policy the examples ship (examples/policy), so that the policy, its
// fixtures and its expectations stay true together.
func TestExamplePolicy(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"policy", "test", "../../examples/policy/tests"}, strings.NewReader(""), &stdout, &stderr)
	if code != 0 || strings.Contains(stdout.String(), "FAIL") {
		t.Fatalf("kewplan policy test examples/policy/tests exited %d:\n%s%s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "--- PASS: opus-fan-out\n") {
		t.Errorf("the output lists no passing opus-fan-out case:\n%s", stdout.String())
	}
}
