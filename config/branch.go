package config

import (
	"net/url"
	"path"
	"strings"
)

// Where a worker's work lands: the branch patterns that protect branches and bound pushes, and the short name of
// a repository that plans, policies and diffs compare.

// BuiltinProtectedBranches are the branches no worker pushes to unless its node says allow_protected_push: the
// names teams give their production and integration branches.
var BuiltinProtectedBranches = []string{"main", "master", "trunk", "develop", "release/*"}

// CheckBranchPattern returns why pat cannot be a branch pattern, or "". A pattern is a branch name in which "*"
// matches any characters but "/" and "**" any characters, "/" included; "refs/heads/" is implied.
func CheckBranchPattern(pat string) string {
	name := strings.TrimPrefix(pat, "refs/heads/")
	if name == "" {
		return "it is empty. Write a branch name or pattern, such as \"prod/*\"."
	}
	// A pattern is a valid ref name once each wildcard stands for a letter.
	if msg := checkRefName(strings.ReplaceAll(name, "*", "x")); msg != "" {
		return msg
	}
	return ""
}

// MatchBranch reports whether branch (with or without "refs/heads/") matches pat (see CheckBranchPattern).
func MatchBranch(pat, branch string) bool {
	return globMatch(strings.TrimPrefix(pat, "refs/heads/"), strings.TrimPrefix(branch, "refs/heads/"))
}

// MatchRepository reports whether a repository URL matches pat, a pattern over its short name (RepositoryName)
// in which "*" matches within one path component and "**" across them: "github.com/acme/*".
func MatchRepository(pat, repo string) bool {
	return globMatch(strings.TrimSuffix(strings.ToLower(pat), ".git"), strings.ToLower(RepositoryName(repo)))
}

// CheckRepositoryPattern returns why pat cannot be a repository pattern, or "".
func CheckRepositoryPattern(pat string) string {
	switch {
	case strings.TrimSpace(pat) == "":
		return "it is empty. Write a repository's host and path, such as \"github.com/acme/*\"."
	case pat != strings.TrimSpace(pat) || strings.ContainsAny(pat, " \t\r\n"):
		return "it holds white space. Write a repository's host and path, such as \"github.com/acme/*\"."
	case strings.Contains(pat, "://") || strings.Contains(pat, "@"):
		return "it is a URL. Write the repository's host and path without scheme or user, such as \"github.com/acme/widgets\"."
	}
	return ""
}

// RepositoryName is a repository URL as host and path, without scheme, user, password, default port or ".git":
// "https://x:tok@github.com/acme/widgets.git" and "git@github.com:acme/widgets.git" are both
// "github.com/acme/widgets". A local path stays a path. It never holds a credential of the URL.
func RepositoryName(repo string) string {
	trim := func(p string) string {
		p = strings.TrimSuffix(strings.TrimSuffix(p, "/"), ".git")
		return strings.TrimSuffix(p, "/")
	}
	if u, err := url.Parse(repo); err == nil && u.Scheme != "" && len(u.Scheme) > 1 {
		if u.Scheme == "file" {
			return trim(u.Path)
		}
		host := u.Hostname()
		if p := u.Port(); p != "" && !(p == "443" && u.Scheme == "https") && !(p == "22" && u.Scheme == "ssh") && !(p == "80" && u.Scheme == "http") {
			host += ":" + p
		}
		return strings.ToLower(host) + trim(path.Clean("/"+u.Path))
	}
	// scp-like: [user@]host:path
	if i := strings.Index(repo, ":"); i > 0 && !strings.Contains(repo[:i], "/") {
		host := repo[:i]
		if at := strings.LastIndex(host, "@"); at >= 0 {
			host = host[at+1:]
		}
		return strings.ToLower(host) + trim(path.Clean("/"+repo[i+1:]))
	}
	return trim(repo)
}

// globMatch matches s against pat, where "**" matches any run of characters and "*" any run without "/". It
// runs in time len(pat)×len(s), whatever the pattern: a hostile pattern cannot make it backtrack.
func globMatch(pat, s string) bool {
	// cur[j]: pat[:i] matches s[:j].
	cur := make([]bool, len(s)+1)
	next := make([]bool, len(s)+1)
	cur[0] = true
	for i := 0; i < len(pat); {
		clear(next)
		switch {
		case strings.HasPrefix(pat[i:], "**"):
			for j := 0; j <= len(s); j++ {
				next[j] = cur[j] || (j > 0 && next[j-1])
			}
			i += 2
			for i < len(pat) && pat[i] == '*' {
				i++
			}
		case pat[i] == '*':
			for j := 0; j <= len(s); j++ {
				next[j] = cur[j] || (j > 0 && next[j-1] && s[j-1] != '/')
			}
			i++
		default:
			for j := 1; j <= len(s); j++ {
				next[j] = cur[j-1] && s[j-1] == pat[i]
			}
			i++
		}
		cur, next = next, cur
	}
	return cur[len(s)]
}
