// Package verdict reads a reviewer's verdict sidecar out of a checkout the agent controlled: once, without
// following a link, bounded in size, stored and digested on the host, and parsed by a strict decoder that refuses
// anything ambiguous. Every failure is an *Error that holds the node for a human; nothing here runs a container or
// decides what a verdict does to the plan.
package verdict
