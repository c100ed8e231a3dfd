package views

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/kewplan/kewplan/executor"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/internal/jsonstream"
	"github.com/kewplan/kewplan/internal/termsafe"
)

// Salvage is the view of `kewplan salvage` and `kewplan runs prune`.
type Salvage interface {
	Published(out *executor.SalvageOutcome) error
	Pruned(out *executor.PruneOutcome) error
}

// NewSalvage returns the salvage view: text, or JSON.
func NewSalvage(vt ViewType, s Streams) Salvage { return &salvageView{NewView(s), vt} }

type salvageView struct {
	*View
	vt ViewType
}

// SalvageJSON is the document of `kewplan salvage --json`.
type SalvageJSON struct {
	Run                string         `json:"run"`
	Node               string         `json:"node"`
	Branch             string         `json:"branch"`
	Commit             string         `json:"commit"`
	PullRequest        string         `json:"pull_request,omitempty"`
	PullRequestSkipped string         `json:"pull_request_skipped,omitempty"`
	Salvage            ledger.Salvage `json:"salvage"`
}

func (v *salvageView) Published(out *executor.SalvageOutcome) error {
	s := sanitizeSalvage(&out.Salvage)
	if v.vt == viewJSON {
		return jsonstream.Indented(v.streams.Stdout, SalvageJSON{Run: out.RunID, Node: out.Node, Branch: termsafe.Flatten(out.Branch),
			Commit: out.Commit, PullRequest: termsafe.Flatten(out.PullRequest), PullRequestSkipped: termsafe.Flatten(out.PullRequestSkipped), Salvage: *s})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Published the work kept of node %q (run %s): %s.\n", out.Node, out.RunID, s.Summary())
	fmt.Fprintf(&b, "  branch        %s\n  commit        %s\n", out.Branch, out.Commit)
	if out.PullRequest != "" {
		fmt.Fprintf(&b, "  pull request  %s (draft)\n", out.PullRequest)
	}
	if out.PullRequestSkipped != "" {
		fmt.Fprintf(&b, "  pull request  none: %s\n", out.PullRequestSkipped)
	}
	_, err := io.WriteString(v.streams.Stdout, termsafe.Text(b.String()))
	return err
}

func (v *salvageView) Pruned(out *executor.PruneOutcome) error {
	if v.vt == viewJSON {
		return jsonstream.Indented(v.streams.Stdout, out)
	}
	var b strings.Builder
	if len(out.Pruned) == 0 {
		fmt.Fprintf(&b, "Nothing to prune: %d runs left as they are.\n", out.Kept)
	} else {
		fmt.Fprintf(&b, "Pruned %d runs (%s of checkouts, logs and kept work); %d newer runs left intact. Their ledger rows stay, marked pruned.\n",
			len(out.Pruned), ledger.FormatBytes(out.Bytes), out.Kept)
		for _, r := range out.Pruned {
			fmt.Fprintf(&b, "  %s  started %s  %s\n", r.RunID, r.Started.UTC().Format(time.RFC3339), ledger.FormatBytes(r.Bytes))
		}
	}
	_, err := io.WriteString(v.streams.Stdout, termsafe.Text(b.String()))
	return err
}

// sanitizeSalvage copies a node's salvage with every agent-influenced string cleaned (the skipped entries name
// files the agent made).
func sanitizeSalvage(s *ledger.Salvage) *ledger.Salvage {
	if s == nil {
		return nil
	}
	c := *s
	c.Skipped = make([]string, len(s.Skipped))
	for i, e := range s.Skipped {
		c.Skipped[i] = termsafe.Flatten(e)
	}
	c.CommitsLost = termsafe.Flatten(s.CommitsLost)
	return &c
}

// writeSalvageHuman is a node's salvage in `runs show`: what was kept and why, where, and whether it was
// published or pruned.
func writeSalvageHuman(field func(name, value string), s *ledger.Salvage) {
	if s == nil {
		return
	}
	line := s.Summary() + "; kept because " + s.Why
	switch {
	case s.Pruned:
		line += " (pruned: removed by kewplan runs prune)"
	case s.PublishedBranch != "":
		line += "; published to " + s.PublishedBranch
	}
	field("kept", termsafe.String(line))
	if !s.Pruned {
		field("kept in", termsafe.String(s.Dir))
	}
	for _, e := range s.Skipped {
		field("not kept", termsafe.String(e))
	}
	field("commits lost", termsafe.String(s.CommitsLost))
}
