// Package views renders kewplan's models (diagnostics, plans, apply events, runs, diffs) as human text, JSON,
// markdown and SARIF. It is the only package that formats output for people or machines; it does no I/O beyond
// writing to the io.Writer it is given.
package views
