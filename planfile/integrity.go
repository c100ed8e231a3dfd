package planfile

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kewplan/kewplan/internal/jsonstream"
	"github.com/kewplan/kewplan/internal/termsafe"
	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/planner"
)

// ErrMismatch is wrapped by the errors of CheckIntegrity and of Reload's comparison: the plan file does not match
// what it records or what its configuration plans, so it was edited after kewplan plan wrote it.
var ErrMismatch = errors.New("this plan file does not match")

// nodesDigest hashes the document without its saved object, in encoding/json's compact encoding (HTML
// characters unescaped) with the encoder's newline: the indented stream Write writes, compacted on its way into
// the hash (jsonstream.Compacting gives the same bytes), so that a large plan's text is never held whole.
func nodesDigest(doc *jsonplan.Document) (string, error) {
	c := *doc
	c.Saved = nil
	h := sha256.New()
	if err := c.WriteIndented(jsonstream.Compacting(h)); err != nil {
		return "", err
	}
	h.Write([]byte("\n"))
	return hex.EncodeToString(h.Sum(nil)), nil
}

// CheckIntegrity checks a saved plan against itself, without its configuration: the config digest against the
// files and variable values the plan records, and the nodes digest (which must be there) against the document. A plan --json
// document (no saved object) has nothing to check here. The error wraps ErrMismatch.
func (f *File) CheckIntegrity() error {
	doc, s := f.Doc, f.Doc.Saved
	if s == nil {
		return nil
	}
	var problems []string
	if (&planner.DigestInputs{Files: s.Files, Variables: s.Variables}).Digest() != doc.ConfigDigest {
		problems = append(problems, "its config_digest does not match the files and variable values it records")
	}
	// Every plan file kewplan writes has a nodes digest: one without is an edited one, not an old one.
	if s.NodesDigest == "" {
		problems = append(problems, "it has no nodes_digest (every plan file kewplan plan writes has one)")
	} else if sum, err := nodesDigest(doc); err != nil || sum != s.NodesDigest {
		problems = append(problems, "its nodes_digest does not match its nodes (an argv, an image, a credential or another field was changed)")
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w what kewplan plan wrote: %s, so it was edited. Do not apply it; run kewplan plan again and review the new plan",
		ErrMismatch, strings.Join(problems, "; "))
}

// compareNodes compares the nodes of a plan file with a fresh plan of its configuration: everything apply runs
// (argv, image, credentials, prompt digest, network, runtime, egress list) must be the same. The error wraps
// ErrMismatch and says what differs.
func compareNodes(doc, fresh *jsonplan.Document) error {
	if len(fresh.Nodes) != len(doc.Nodes) {
		return fmt.Errorf("%w its configuration: it holds %d nodes, and the configuration plans %d, so the plan file was edited. Do not apply it; run kewplan plan again", ErrMismatch, len(doc.Nodes), len(fresh.Nodes))
	}
	for i := range fresh.Nodes {
		a, b := &doc.Nodes[i], &fresh.Nodes[i]
		var diffs []string
		if a.Name != b.Name {
			diffs = append(diffs, fmt.Sprintf("the configuration plans node %q here", b.Name))
		}
		if a.Image != b.Image {
			diffs = append(diffs, fmt.Sprintf("image %s, the configuration gives %s", a.Image, b.Image))
		}
		if a.Prompt != b.Prompt {
			diffs = append(diffs, "its prompt digest differs")
		}
		if !slices.Equal(a.Credentials, b.Credentials) {
			diffs = append(diffs, fmt.Sprintf("credentials %s, the configuration gives %s", listOrNone(a.Credentials), listOrNone(b.Credentials)))
		}
		if !slices.Equal(a.Argv, b.Argv) {
			diffs = append(diffs, "argv "+argvDelta(a.Argv, b.Argv))
		}
		if a.Network != b.Network || a.Runtime != b.Runtime {
			diffs = append(diffs, fmt.Sprintf("network %q and runtime %q, the configuration gives %q and %q", a.Network, a.Runtime, b.Network, b.Runtime))
		}
		if !egressEqual(a.Egress, b.Egress) {
			diffs = append(diffs, "its egress list differs")
		}
		if len(diffs) > 0 {
			// The plan file's side of each difference is its text: escaped, as every string from a file is.
			return fmt.Errorf("%w its configuration: node %s has %s, so the plan file was edited. Do not apply it; run kewplan plan again and review the new plan",
				ErrMismatch, termsafe.String(strconv.Quote(a.Name)), termsafe.String(strings.Join(diffs, "; ")))
		}
	}
	return nil
}

func egressEqual(a, b []jsonplan.EgressHostDocument) bool {
	return slices.EqualFunc(a, b, func(x, y jsonplan.EgressHostDocument) bool {
		return x.Host == y.Host && x.Port == y.Port && slices.Equal(x.Origins, y.Origins)
	})
}

// argvDelta names the words one argv has that the other has not ("--privileged added"), for the error.
func argvDelta(got, want []string) string {
	count := func(s []string) map[string]int {
		m := map[string]int{}
		for _, w := range s {
			m[w]++
		}
		return m
	}
	g, w := count(got), count(want)
	var added, removed []string
	for _, x := range got {
		if g[x] > w[x] && !slices.Contains(added, x) {
			added = append(added, x)
		}
	}
	for _, x := range want {
		if w[x] > g[x] && !slices.Contains(removed, x) {
			removed = append(removed, x)
		}
	}
	var parts []string
	if len(added) > 0 {
		parts = append(parts, strings.Join(added, " ")+" added")
	}
	if len(removed) > 0 {
		parts = append(parts, strings.Join(removed, " ")+" removed")
	}
	if len(parts) == 0 {
		return "reordered"
	}
	return "differs (" + strings.Join(parts, "; ") + ")"
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
