// Package runners holds the adapters for each coding agent kewplan can contain: the credential names it needs,
// the container args for a routed model, and a meter that reads its stdout vocabulary into run totals.
//
// Runners are pure: no I/O, no Docker, no environment. The executor feeds them lines; the planner asks them for
// credentials and args.
package runners
