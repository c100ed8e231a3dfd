//go:build unix

package broker

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/kewplan/kewplan/planner"
)

// refusePlantedFiles refuses a push when any new commit (base..head, every one, merges against each parent)
// adds or changes a file named like the prompt file or the reviewer sidecar, at any path. The net diff is not
// enough: a commit that adds the prompt and a later one that removes it still put the prompt in the branch's
// history. Names are compared without regard to case, as a case-insensitive checkout would collide with them.
func refusePlantedFiles(ctx context.Context, g *hostGit, host, base, head string) error {
	revs, err := g.sealed(ctx, nil, "--git-dir="+host, "rev-list", base+".."+head)
	if err != nil {
		return fmt.Errorf("list the agent's commits: %w", err)
	}
	commits := map[string]bool{}
	for _, id := range strings.Fields(string(revs)) {
		commits[id] = true
	}
	if len(commits) == 0 {
		return nil
	}
	out, err := g.sealed(ctx, strings.NewReader(string(revs)), "--git-dir="+host, "diff-tree", "--stdin", "-m",
		"-r", "-z", "--root", "--no-renames", "--name-only", "--diff-filter=d")
	if err != nil {
		return fmt.Errorf("list the agent's changes: %w", err)
	}
	// The output is, per commit with changes, its id and then the paths it adds or changes. A path spelled like a
	// commit id can only misattribute a finding, never hide one.
	current := head
	for _, tok := range strings.Split(string(out), "\x00") {
		if id, _, _ := strings.Cut(tok, " "); commits[id] {
			current = id
			continue
		}
		if err := plantedFile(tok, current); err != nil {
			return err
		}
	}
	return nil
}

// PlantedFileError is a push refused because the agent committed a file the host owns (the prompt file or the
// reviewer sidecar). Nothing was pushed; the node is held for a human.
type PlantedFileError struct {
	Path   string // the path in the commit's tree
	Commit string
	Prompt bool // the prompt file, else the reviewer sidecar
}

func (e *PlantedFileError) Error() string {
	if e.Prompt {
		return fmt.Sprintf("the agent committed the prompt file %s in %s; nothing was pushed (the prompt must never "+
			"land in a branch: a worker must not commit %s)", e.Path, e.Commit, planner.PromptFilename)
	}
	return fmt.Sprintf("the agent committed the reviewer sidecar %s in %s, which a downstream reviewer would read "+
		"as its verdict; nothing was pushed (a worker must never commit %s)", e.Path, e.Commit, planner.VerdictFilename)
}

func plantedFile(p, commit string) error {
	switch base := path.Base(p); {
	case p == "":
		return nil
	case strings.EqualFold(base, planner.PromptFilename):
		return &PlantedFileError{Path: p, Commit: commit, Prompt: true}
	case strings.EqualFold(base, planner.VerdictFilename):
		return &PlantedFileError{Path: p, Commit: commit}
	}
	return nil
}
