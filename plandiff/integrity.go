package plandiff

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/kewplan/kewplan/internal/termsafe"
	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/planner"
)

// CheckDocument reads a plan document against itself, the way kewplan writes one: each node's argv runs the
// image the node names, forwards exactly the credentials it lists and keeps the hardening floor every argv
// kewplan writes meets, and the exposure table agrees with the nodes. A plan file edited by hand (an argv given
// --privileged, an image swapped, a credential added to the argv only) fails here even when its configuration is
// not at hand to re-plan it. It returns one sentence per problem, escaped for a terminal (termsafe.String), or
// nil.
func CheckDocument(doc *jsonplan.Document) []string {
	var out []string
	exposure := map[string][]string{}
	for i := range doc.Nodes {
		n := &doc.Nodes[i]
		for _, c := range n.Credentials {
			exposure[c] = append(exposure[c], n.Name)
		}
		if len(n.Argv) == 0 {
			continue
		}
		for _, p := range checkNodeArgv(n) {
			out = append(out, fmt.Sprintf("node %q: %s", n.Name, p))
		}
	}
	for c, nodes := range exposure {
		sort.Strings(nodes)
		recorded := slices.Clone(doc.Exposure[c])
		sort.Strings(recorded)
		if !slices.Equal(nodes, recorded) {
			out = append(out, fmt.Sprintf("the exposure table says %s reaches %s, the nodes say %s",
				c, listOrNone(recorded), listOrNone(nodes)))
		}
	}
	for c := range doc.Exposure {
		if _, ok := exposure[c]; !ok && len(doc.Exposure[c]) > 0 {
			out = append(out, fmt.Sprintf("the exposure table lists %s, which no node forwards", c))
		}
	}
	// Every name in these sentences came from the file: escaped, so a plan under review cannot drive the terminal
	// that reads why it was refused.
	for i := range out {
		out[i] = termsafe.String(out[i])
	}
	sort.Strings(out)
	return out
}

// checkNodeArgv compares one node's argv with the rest of its document.
func checkNodeArgv(n *jsonplan.NodeDocument) []string {
	run := parseDockerRun(n.Argv)
	if !run.Parsed {
		return []string{"its argv is not a docker run command kewplan writes"}
	}
	var out []string
	if run.Image != n.Image {
		out = append(out, fmt.Sprintf("its argv runs image %s, the plan says %s", run.Image, n.Image))
	}
	// Credentials are forwarded by name (-e NAME, the value taken from kewplan's environment); the proxy
	// variables are forwarded the same way but are not credentials.
	var forwarded []string
	for _, o := range run.Options {
		// A brokered node's base-URL variable is forwarded by name too (apply points it at the proxy): the
		// document names it, and it is no credential.
		if o.Name == "--env" && !strings.Contains(o.Value, "=") && !slices.Contains(planner.ProxyVariables, o.Value) &&
			(n.BaseURLVariable == "" || o.Value != n.BaseURLVariable) {
			forwarded = append(forwarded, o.Value)
		}
	}
	sort.Strings(forwarded)
	listed := slices.Clone(n.Credentials)
	sort.Strings(listed)
	if !slices.Equal(forwarded, listed) {
		out = append(out, fmt.Sprintf("its argv forwards %s, the plan lists the credentials %s",
			listOrNone(forwarded), listOrNone(listed)))
	}
	// The floor every argv kewplan writes meets, and nothing that breaks out of it (--privileged, --cap-add,
	// host namespaces, extra mounts: missingHardening compares against an argv that has none of them).
	out = append(out, missingHardening(readHardening(n.Argv))...)
	return out
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
