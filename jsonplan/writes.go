package jsonplan

import (
	"sort"

	"github.com/kewplan/kewplan/config"
)

// RepositoryWrites is what the nodes of a plan do to one repository: where each worker pushes, and which
// reviewers only read it.
type RepositoryWrites struct {
	// Repository is the repository's short name ("github.com/acme/widgets"); "" for nodes whose repository is
	// known only after apply.
	Repository string
	Writes     []NodeWrite
	// Readers are the reviewers of the repository, which push nothing.
	Readers []string
}

// NodeWrite is one worker's push.
type NodeWrite struct {
	Node string
	// Branch is "" when it is known only after apply.
	Branch string
	// PullRequestBase is the branch its pull request goes into; "" when it opens none.
	PullRequestBase string
	Protected       bool
}

// Writes groups the plan's nodes by repository, repositories by name (the unknown one last), nodes in plan order.
func (d *Document) Writes() []RepositoryWrites {
	byRepo := map[string]*RepositoryWrites{}
	var names []string
	for i := range d.Nodes {
		n := &d.Nodes[i]
		name := config.RepositoryName(n.Repository)
		rw := byRepo[name]
		if rw == nil {
			rw = &RepositoryWrites{Repository: name}
			byRepo[name] = rw
			names = append(names, name)
		}
		if n.Push == nil {
			rw.Readers = append(rw.Readers, n.Name)
			continue
		}
		w := NodeWrite{Node: n.Name, Branch: n.Push.Branch, Protected: n.Push.Protected}
		if n.Push.PullRequest != nil {
			w.PullRequestBase = n.Push.PullRequest.Base
		}
		rw.Writes = append(rw.Writes, w)
	}
	sort.Slice(names, func(i, j int) bool {
		if (names[i] == "") != (names[j] == "") {
			return names[j] == ""
		}
		return names[i] < names[j]
	})
	out := make([]RepositoryWrites, 0, len(names))
	for _, name := range names {
		out = append(out, *byRepo[name])
	}
	return out
}
