package executor

import (
	"context"
	"errors"
)

// BrokerRequest asks the host broker to publish a worker's commits after a clean exit.
type BrokerRequest struct {
	Checkout   string // the agent's checkout (hostile: the agent controlled every byte of it)
	Repo       string // remote the checkout was cloned from
	BaseCommit string // commit the checkout was cloned at
	Branch     string // remote branch to push to (default kew/<node>)
	StateDir   string // host-owned scratch space for the broker
	// PullRequest, when not nil, asks for a pull request after the push.
	PullRequest *PullRequestRequest
}

// PullRequestRequest is a node's pull_request block, evaluated.
type PullRequestRequest struct {
	Base  string
	Title string
}

// PushResult is what the broker did.
type PushResult struct {
	Commit string // HEAD after the run: the pushed commit, or BaseCommit when there were no new commits
	Branch string // the branch pushed to ("" when nothing was pushed)
	Pushed bool
	// PullRequest is the URL of the opened pull request; PullRequestSkipped says why none was opened.
	PullRequest        string
	PullRequestSkipped string
}

// BrokerPush publishes the worker's new commits from a host-owned repository, never running anything the agent
// could have configured in the checkout.
// STUB: the reviewers work replaces this body.
func BrokerPush(ctx context.Context, req BrokerRequest) (*PushResult, error) {
	return nil, errors.New("host broker not implemented yet")
}
