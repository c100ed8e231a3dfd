package config

import (
	"fmt"
	"regexp"
	"strings"
)

// A container runtime is the isolation tier a node's container runs on: the engine's default (runc, which shares
// the host kernel with the agent), or a runtime registered with the engine such as gVisor's "runsc" (a user-space
// kernel between the agent and the host). It is written `runtime = "runsc"` in the sandbox block (every node) or in
// a node block (that node); the policy block's required_runtime demands one. On Kubernetes the same choice is a
// RuntimeClass; kewplan calls it "runtime" in both places.

// runtimeNamePattern is what the engine accepts as a runtime name in daemon.json and `docker run --runtime`.
var runtimeNamePattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)

// maxRuntimeNameLen bounds a runtime name; the engine sets no limit, but no real name comes near it.
const maxRuntimeNameLen = 128

// runtimeFix is how to fix a sandbox's or node's runtime.
const runtimeFix = "Name a runtime registered with the engine, such as \"runsc\" for gVisor, or remove the argument for the engine's default runtime."

// checkRuntimeName returns why s cannot be a runtime name, as the end of a sentence ("it is empty. ..."), followed
// by fix; or "".
func checkRuntimeName(s, fix string) string {
	switch {
	case s == "":
		return "it is empty. " + fix
	case strings.HasPrefix(s, "-"):
		return fmt.Sprintf("%q starts with '-', so docker would read it as an option. %s", shortValue(s), fix)
	case len(s) > maxRuntimeNameLen:
		return fmt.Sprintf("it is %d bytes long, and a runtime name is at most %d. %s", len(s), maxRuntimeNameLen, fix)
	case !runtimeNamePattern.MatchString(s):
		return fmt.Sprintf("%q is not a runtime name: a runtime name starts with a letter or digit and holds letters, digits, '_', '.' and '-'; it is the name under \"runtimes\" in the engine's daemon.json, not a path. %s", shortValue(s), fix)
	}
	return ""
}

// shortValue keeps a diagnostic readable (and free of control characters, which %q escapes) when a value is long.
func shortValue(s string) string {
	if len(s) <= 60 {
		return s
	}
	return s[:57] + "..."
}
