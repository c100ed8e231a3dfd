package config

import (
	"strings"
	"testing"
)

func TestMatchBranch(t *testing.T) {
	for _, tc := range []struct {
		pat, branch string
		want        bool
	}{
		{"main", "main", true},
		{"main", "refs/heads/main", true},
		{"main", "mainline", false},
		{"release/*", "release/1.2", true},
		{"release/*", "release/1/2", false},
		{"release/**", "release/1/2", true},
		{"**", "a/b/c", true},
		{"*", "a/b", false},
		{"prod-*", "prod-eu", true},
		{"*-prod", "eu-prod", true},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
	} {
		if got := MatchBranch(tc.pat, tc.branch); got != tc.want {
			t.Errorf("MatchBranch(%q, %q) = %v, want %v", tc.pat, tc.branch, got, tc.want)
		}
	}
}

func TestGlobMatchIsLinear(t *testing.T) {
	// A backtracking matcher takes exponential time on this; globMatch takes len(pat)×len(s) steps.
	pat := strings.Repeat("*a", 40) + "b"
	s := strings.Repeat("a", 4000)
	if globMatch(pat, s) {
		t.Fatal("matched")
	}
}

func TestRepositoryName(t *testing.T) {
	for in, want := range map[string]string{
		"https://github.com/acme/widgets.git":              "github.com/acme/widgets",
		"https://x:tok@GitHub.com/acme/widgets.git/":       "github.com/acme/widgets",
		"https://github.com:443/acme/widgets":              "github.com/acme/widgets",
		"https://git.corp:8443/acme/widgets.git":           "git.corp:8443/acme/widgets",
		"git@github.com:acme/widgets.git":                  "github.com/acme/widgets",
		"ssh://git@github.com/acme/widgets.git":            "github.com/acme/widgets",
		"file:///srv/git/widgets.git":                      "/srv/git/widgets",
		"/srv/git/widgets.git":                             "/srv/git/widgets",
		"https://github.com/acme/../evil/widgets.git":      "github.com/evil/widgets",
		"https://github.com/acme/widgets.git?token=s3cr3t": "github.com/acme/widgets",
	} {
		if got := RepositoryName(in); got != want {
			t.Errorf("RepositoryName(%q) = %q, want %q", in, got, want)
		}
	}
	if !MatchRepository("github.com/acme/*", "https://github.com/acme/widgets.git") ||
		MatchRepository("github.com/acme/*", "https://github.com/evil/widgets.git") {
		t.Error("MatchRepository")
	}
}
