package plandiff

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/planner"
)

// Finding kinds of the write side: where a node's agent's work is pushed.
const (
	// KindPushWidened: a node writes somewhere it did not (a new repository or branch, a pull request's base
	// changed, a reviewer turned worker, a protected branch allowed).
	KindPushWidened = "widening-push"
	// KindPushNarrowed: a worker turned reviewer, or no longer may push to a protected branch.
	KindPushNarrowed = "narrowing-push"
)

// pushRule is the catalogue entry of KindPushWidened.
var pushRule = planner.Rule{
	ID: KindPushWidened, Severity: planner.SeverityError,
	Summary:     "Node writes somewhere it did not before",
	Description: "Where an agent can write is half of what it can do: a node now pushes to a repository or branch it did not push to in the base plan, its pull request goes into another base, a reviewer (which pushes nothing) became a worker, or a worker may now push to a protected branch.",
	Help:        "Check that the node should write there. If it should not, restore its repo, branch, pull_request base or role; if it should, approve the change explicitly.",
}

// pushText is a node's push for a field change: "kew/fix of github.com/acme/widgets, pull request into main".
func pushText(n *jsonplan.NodeDocument) string {
	if n.Push == nil {
		if n.Role == config.RoleWorker {
			return "(not recorded)"
		}
		return "(none)"
	}
	s := orNone(n.Push.Branch)
	if pr := n.Push.PullRequest; pr != nil {
		s += ", pull request into " + orDefault(pr.Base)
	}
	if n.Push.AllowProtectedPush {
		s += ", allow_protected_push"
	}
	return s
}

func orDefault(base string) string {
	if base == "" {
		return "the default branch"
	}
	return base
}

// addedPushFindings judges a new node's push: a new worker writes to a branch no node of BASE wrote to.
func addedPushFindings(n *jsonplan.NodeDocument, r *hcl.Range) []Finding {
	if n.Push == nil {
		return nil
	}
	msg := fmt.Sprintf("The new node %s pushes to the branch %s of %s", nodeLabel(n.Name), orNone(n.Push.Branch), orNone(config.RepositoryName(n.Repository)))
	if pr := n.Push.PullRequest; pr != nil {
		msg += " and opens a pull request into " + orDefault(pr.Base)
	}
	if n.Push.Protected {
		msg += " (a protected branch, allowed by allow_protected_push)"
	}
	return []Finding{{Kind: KindPushWidened, Widening: true, Node: n.Name, Range: r, Message: msg + "."}}
}

// comparePush judges where a node present on both sides writes. A base plan that does not record a worker's push
// (written before pushes were part of the plan) is judged as writing nowhere: the gate fails closed.
func comparePush(b, h *jsonplan.NodeDocument, r *hcl.Range) []Finding {
	var out []Finding
	widen := func(format string, args ...any) {
		out = append(out, Finding{Kind: KindPushWidened, Widening: true, Node: h.Name, Range: r,
			Message: fmt.Sprintf("Node %s ", nodeLabel(h.Name)) + fmt.Sprintf(format, args...) + "."})
	}
	narrow := func(format string, args ...any) {
		out = append(out, Finding{Kind: KindPushNarrowed, Node: h.Name, Range: r,
			Message: fmt.Sprintf("Node %s ", nodeLabel(h.Name)) + fmt.Sprintf(format, args...) + "."})
	}
	hRepo, bRepo := config.RepositoryName(h.Repository), config.RepositoryName(b.Repository)
	switch {
	case h.Push == nil && b.Push == nil:
		return nil
	case h.Push == nil:
		narrow("no longer pushes (it is a reviewer)")
		return out
	case b.Push == nil && b.Role == config.RoleReviewer:
		widen("turned from reviewer into worker: it now pushes to the branch %s of %s", orNone(h.Push.Branch), orNone(hRepo))
		return out
	case b.Push == nil:
		widen("pushes to the branch %s of %s, which the base plan does not record", orNone(h.Push.Branch), orNone(hRepo))
		return out
	}
	if hRepo != bRepo {
		widen("now writes to the repository %s (it wrote to %s)", orNone(hRepo), orNone(bRepo))
	} else if h.Push.Branch != b.Push.Branch {
		widen("now pushes to the branch %s of %s (it pushed to %s)", orNone(h.Push.Branch), orNone(hRepo), orNone(b.Push.Branch))
	}
	bpr, hpr := b.Push.PullRequest, h.Push.PullRequest
	switch {
	case bpr != nil && hpr != nil && bpr.Base != hpr.Base:
		widen("now opens its pull request into %s (it went into %s)", orDefault(hpr.Base), orDefault(bpr.Base))
	case bpr == nil && hpr != nil:
		widen("now opens a pull request into %s", orDefault(hpr.Base))
	}
	switch {
	case !b.Push.AllowProtectedPush && h.Push.AllowProtectedPush:
		widen("may now push to a protected branch (allow_protected_push = true)")
	case b.Push.AllowProtectedPush && !h.Push.AllowProtectedPush:
		narrow("may no longer push to a protected branch")
	}
	return out
}
