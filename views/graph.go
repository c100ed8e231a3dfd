package views

import (
	"io"
	"strings"

	"github.com/kewplan/kewplan/internal/termsafe"
	"github.com/kewplan/kewplan/jsonplan"
)

// WriteGraphDOT writes the dispatch graph as Graphviz DOT: a box per node labelled with its runner and role,
// and an edge from each dependency to the node that waits for it (the order apply runs them). Nodes and edges
// follow the plan's dependency order, so the output is deterministic.
func WriteGraphDOT(w io.Writer, doc *jsonplan.Document) error {
	pw := &planWriter{w: w}
	pw.printf("digraph kewplan {\n")
	pw.printf("  rankdir = \"LR\";\n")
	pw.printf("  node [shape = \"box\", fontname = \"monospace\"];\n")
	for i := range doc.Nodes {
		n := &doc.Nodes[i]
		runner, role := n.Runner, n.Role
		if runner == "" {
			runner = "?"
		}
		label := n.Name + "\n" + runner + " · " + role
		attrs := "label = " + dotQuote(label)
		if n.Errors {
			attrs += ", color = \"red\""
		}
		if role == "reviewer" {
			attrs += ", style = \"rounded\""
		}
		pw.printf("  %s [%s];\n", dotQuote(n.Name), attrs)
	}
	for i := range doc.Nodes {
		n := &doc.Nodes[i]
		for _, dep := range n.DependsOn {
			pw.printf("  %s -> %s;\n", dotQuote(dep), dotQuote(n.Name))
		}
	}
	pw.printf("}\n")
	return pw.err
}

var dotEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", "")

// dotQuote writes s as a DOT double-quoted string: control characters escaped visibly (termsafe.Text), quotes and
// backslashes escaped, newlines as \n.
func dotQuote(s string) string { return `"` + dotEscaper.Replace(termsafe.Text(s)) + `"` }
