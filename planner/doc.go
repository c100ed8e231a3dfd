// Package planner turns a configuration and its inputs into a Plan: for every node the runner, image, network,
// credentials, container args and prompt, checked against the fail-closed rules, with one Container from which
// both the displayed `docker run` argv and the Docker Engine API configuration are derived.
//
// Build is pure: no Docker, no git, no environment reads. Files named by file() are read through the fs.FS in
// Inputs. The rules live in one catalogue (Rules) with stable ids that diagnostics carry in their Extra.
//
// The planner knows nothing of the plan's JSON document: package jsonplan turns a Plan into it, and package
// planfile writes, reads, checks and reloads plan files. The planner touches no file itself and does not print.
//
// Each node also carries its effective retry policy (RetryPolicy; RetryWait is the backoff schedule the
// executor sleeps on). Fingerprint digests what a node's run depends on, and Resume decides, against what a
// previous run recorded (PreviousRun, filled from the ledger by the caller), which nodes reuse their recorded
// outputs and why the others run.
package planner
