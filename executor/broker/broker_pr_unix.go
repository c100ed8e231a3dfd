//go:build unix

package broker

import (
	"context"
	"fmt"
	"net/url"
	"strings"
)

// openPullRequest opens a pull request with gh after a push. It returns the pull request's URL, or why none was
// opened; a failure here never undoes the push.
func openPullRequest(ctx context.Context, g *hostGit, req Request, head string) (prURL, skipped string) {
	gh, err := lookPathIn("gh", req.Environ)
	if err != nil {
		return "", fmt.Sprintf("gh is not installed (not found in PATH); open a pull request from branch %s by hand", req.Branch)
	}
	host, repo, ok := githubRepo(req.Repo)
	if !ok {
		return "", fmt.Sprintf("%s is not a hosted repository URL, so gh cannot open a pull request for it", redactURLCredentials(req.Repo))
	}
	env := append(g.hostEnv(), "GH_PROMPT_DISABLED=1", "GH_NO_UPDATE_NOTIFIER=1", "NO_COLOR=1")
	if _, err := runHostCommand(ctx, gh, g.dir, env, nil, "auth", "status", "--hostname", host); err != nil {
		return "", fmt.Sprintf("gh is not authenticated for %s (run `gh auth login`): %v", host, err)
	}
	title := req.PullRequest.Title
	if title == "" {
		title = "kewplan: " + req.Branch
	}
	body := req.PullRequest.Body
	if body == "" {
		body = fmt.Sprintf("Pushed by kewplan's host broker from commit %s.", head)
	}
	args := []string{"pr", "create", "--repo", host + "/" + repo, "--head", req.Branch, "--title", title, "--body", body}
	if req.PullRequest.Draft {
		args = append(args, "--draft")
	}
	if req.PullRequest.Base != "" {
		args = append(args, "--base", req.PullRequest.Base)
	}
	out, err := runHostCommand(ctx, gh, g.dir, env, nil, args...)
	if err != nil {
		return "", fmt.Sprintf("gh pr create failed after the push: %v", err)
	}
	lines := strings.Fields(strings.TrimSpace(string(out)))
	if len(lines) == 0 {
		return "", "gh pr create printed no pull request URL"
	}
	return lines[len(lines)-1], ""
}

// githubRepo splits a remote into gh's host and owner/name: https://host/owner/name(.git),
// ssh://user@host/owner/name, or user@host:owner/name.
func githubRepo(remote string) (host, repo string, ok bool) {
	var path string
	if strings.Contains(remote, "://") {
		u, err := url.Parse(remote)
		if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http" && u.Scheme != "ssh") {
			return "", "", false
		}
		host, path = u.Hostname(), u.Path
	} else {
		userHost, p, found := strings.Cut(remote, ":")
		if !found || strings.Contains(userHost, "/") {
			return "", "", false
		}
		_, host, _ = strings.Cut(userHost, "@")
		if !strings.Contains(userHost, "@") {
			host = userHost
		}
		path = p
	}
	path = strings.TrimSuffix(strings.Trim(path, "/"), ".git")
	parts := strings.Split(path, "/")
	if host == "" || len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		return "", "", false
	}
	return host, path, true
}
