//go:build unix

package broker

import (
	"errors"
	"strings"
	"testing"

	"github.com/kewplan/kewplan/planner"
)

// TestBrokerRefusesProtectedBranches: the broker refuses a push to a protected branch, whether a pattern names it
// or only the remote knows it as its default branch, and allow_protected_push lifts the refusal.
func TestBrokerRefusesProtectedBranches(t *testing.T) {
	fx := newBrokerFixture(t)
	// The remote's default branch is one no built-in pattern names: only the remote knows it.
	fx.git("", "--git-dir="+fx.remote, "branch", "production", "main")
	fx.git("", "--git-dir="+fx.remote, "symbolic-ref", "HEAD", "refs/heads/production")
	head := fx.commit("fix.go", "package main // fixed\n")

	for _, tc := range []struct {
		branch   string
		patterns []string
		why      string
	}{
		{"main", nil, "a protected branch"},
		{"release/2.0", nil, "release/*"},
		{"prod/eu", planner.ProtectedBranches([]string{"prod/*"}, ""), "prod/*"},
		{"production", nil, "the remote's default branch"},
	} {
		req := fx.request()
		req.Branch, req.ProtectedBranches = tc.branch, tc.patterns
		before := fx.git("", "--git-dir="+fx.remote, "for-each-ref", "--format=%(refname) %(objectname)")
		_, err := fx.push(req)
		var pe *ProtectedBranchError
		if !errors.As(err, &pe) {
			t.Fatalf("push to %s: err = %v, want a ProtectedBranchError", tc.branch, err)
		}
		if msg := err.Error(); !strings.Contains(msg, planner.RulePushProtectedBranch) || !strings.Contains(msg, tc.why) {
			t.Errorf("push to %s: %q, want the rule and %q", tc.branch, msg, tc.why)
		}
		if after := fx.git("", "--git-dir="+fx.remote, "for-each-ref", "--format=%(refname) %(objectname)"); after != before {
			t.Errorf("push to %s changed the remote:\n%s\n->\n%s", tc.branch, before, after)
		}
		fx.requireStateClean()
	}

	req := fx.request()
	req.Branch, req.AllowProtectedPush = "production", true
	res, err := fx.push(req)
	if err != nil || !res.Pushed {
		t.Fatalf("allow_protected_push: Push() = %+v, %v", res, err)
	}
	if got := strings.TrimSpace(fx.git("", "--git-dir="+fx.remote, "rev-parse", "refs/heads/production")); got != head {
		t.Errorf("production = %s, want %s", got, head)
	}
}
