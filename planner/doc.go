// Package planner turns a configuration and its inputs into a Plan: for every node the runner, image, network,
// credentials, container args and prompt, checked against the fail-closed rules, with one Container from which
// both the displayed `docker run` argv and the Docker Engine API configuration are derived.
//
// Build is pure: no Docker, no git, no environment reads. Files named by file() are read through the fs.FS in
// Inputs. The rules live in one catalogue (Rules) with stable ids that diagnostics carry in their Extra.
//
// The plan's JSON document (Document) is written by views for `plan --json`; a saved plan is the same document
// with a `saved` object. WriteSaved, ReadSaved, CheckStale and Reload are the only functions here that touch the
// file system: they write and read plan files and recompute the config digest, so that `apply PLANFILE` runs
// exactly what was reviewed. The planner does not print; views render a Plan.
package planner
