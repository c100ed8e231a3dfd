// Package views renders kewplan's models (diagnostics, plans, apply events, runs, diffs, check reports) as human
// text, JSON, markdown and SARIF, and it is the only printer: the commands in cmd/kewplan write nothing to stdout
// or stderr themselves (a test in cmd/kewplan scans their source), they hand their streams to a view.
//
// As in Terraform's internal/command/views, each command has one view, returned by a constructor from a ViewType
// (human or JSON) or a --format and the Streams: NewApply, NewPlan, NewShow, NewValidate, NewGraph, NewRunners,
// NewPricing, NewRuns, NewTelemetry, NewDiff, NewCheck (smoke and conform), NewFmt, and View for what every command
// shares (diagnostics, errors, the version). Apply's view returns its progress as hooks (the live or plain
// applyDisplay, or the NDJSON applyStream), which apply takes as its list of executor.Hooks; the executor records
// to the ledger itself, whatever the hooks do. Only what cmd/kewplan uses is exported; a plan document is
// jsonplan's, which views render and never change.
//
// Every string that came from an agent or a plan under review is sanitised or escaped before it is written. The
// package does no I/O beyond writing to the streams and io.Writers it is given.
package views
