// Package jsonplan owns the JSON plan document (`kewplan plan --json`, and saved plans with their `saved` object):
// its types, how a *planner.Plan with its engine, its Kubernetes objects and its diagnostics becomes one
// (NewDocument, SetEngine), its streamed encoding (WriteIndented) and its decoding (Decode).
//
// As Terraform's internal/command/jsonplan sits above its plan model, this package sits above planner and
// k8srender: the planner knows nothing of the document, views only render it, and planfile and plandiff read and
// write it through this package. It does no I/O beyond the io.Writer it is given, and prints nothing.
package jsonplan
