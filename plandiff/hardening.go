package plandiff

import (
	"fmt"
	"math"
)

// hardeningChange is one difference in hardening between two argv.
type hardeningChange struct {
	widening bool
	text     string
}

// compareHardening lists what HEAD's argv lost (widening) or gained (narrowing) against BASE's. An argv that is
// not a docker run command kewplan can read is treated as having lost everything: fail closed.
func compareHardening(b, h hardening) []hardeningChange {
	var out []hardeningChange
	widen := func(format string, args ...any) {
		out = append(out, hardeningChange{true, fmt.Sprintf(format, args...)})
	}
	narrow := func(format string, args ...any) {
		out = append(out, hardeningChange{false, fmt.Sprintf(format, args...)})
	}
	if !h.Parsed {
		if b.Parsed {
			widen("the argv is no longer a docker run command kewplan can read, so none of its hardening can be verified")
		}
		return out
	}
	if !b.Parsed {
		return out
	}
	flag := func(had, has bool, name, lost string) {
		switch {
		case had && !has:
			widen("%s removed: %s", name, lost)
		case !had && has:
			narrow("%s added", name)
		}
	}
	flag(b.ReadOnly, h.ReadOnly, "--read-only", "the root filesystem is writable")
	flag(b.CapDropAll, h.CapDropAll, "--cap-drop ALL", "the container keeps Docker's default capabilities")
	flag(b.NoNewPrivileges, h.NoNewPrivileges, "--security-opt no-new-privileges",
		"setuid binaries can raise the agent's privileges")
	for _, s := range difference(b.Tmpfs, h.Tmpfs) {
		widen("--tmpfs %s removed", s)
	}
	for _, path := range intersect(b.Tmpfs, h.Tmpfs) {
		bf, bs := tmpfsFlags(b.TmpfsOptions[path])
		hf, hs := tmpfsFlags(h.TmpfsOptions[path])
		for _, f := range []string{"noexec", "nosuid", "nodev"} {
			flag(bf[f], hf[f], "--tmpfs "+path+" "+f, "the mount lost "+f)
		}
		compareLimit(bs, hs, "--tmpfs "+path+" size", widen, narrow)
	}
	dangerous := func(had, has []string, what string) {
		for _, s := range difference(has, had) {
			widen("%s %s added", what, s)
		}
		for _, s := range difference(had, has) {
			narrow("%s %s removed", what, s)
		}
	}
	dangerous(b.CapAdd, h.CapAdd, "--cap-add")
	dangerous(b.Unconfined, h.Unconfined, "--security-opt")
	pairs := func(had, has []string) {
		for _, s := range difference(has, had) {
			widen("%s added", s)
		}
		for _, s := range difference(had, has) {
			narrow("%s removed", s)
		}
	}
	pairs(b.HostNamespaces, h.HostNamespaces)
	pairs(b.ExtraMounts, h.ExtraMounts)
	switch {
	case !b.Privileged && h.Privileged:
		widen("--privileged added: the container gets every capability and every host device")
	case b.Privileged && !h.Privileged:
		narrow("--privileged removed")
	}
	switch {
	case !b.NetworkHost && h.NetworkHost:
		widen("the container joins the host's (or another container's) network namespace")
	case b.NetworkHost && !h.NetworkHost:
		narrow("the container no longer shares another network namespace")
	}
	compareLimit(b.PidsLimit, h.PidsLimit, "--pids-limit", widen, narrow)
	compareLimit(b.Memory, h.Memory, "--memory", widen, narrow)
	compareLimit(b.CPUs, h.CPUs, "--cpus", widen, narrow)
	return out
}

// compareLimit judges a resource limit: removing or raising it widens, setting or lowering it narrows, and a value
// kewplan cannot read widens (it cannot be shown to be no weaker).
func compareLimit(b, h limit, name string, widen, narrow func(string, ...any)) {
	switch {
	case !b.Set && !h.Set:
	case h.Set && h.Bad:
		if !b.Set || b.Written != h.Written {
			widen("%s %s cannot be read as a limit", name, quoteWord(h.Written))
		}
	case b.Set && !h.Set:
		if !math.IsInf(b.Value, 1) || b.Bad {
			widen("%s removed (was %s)", name, b.Written)
		}
	case !b.Set && h.Set:
		if !math.IsInf(h.Value, 1) {
			narrow("%s set to %s", name, h.Written)
		}
	case b.Bad:
		narrow("%s set to %s", name, h.Written)
	case h.Value > b.Value:
		if math.IsInf(h.Value, 1) {
			widen("%s lifted (was %s, now %s, which means no limit)", name, b.Written, h.Written)
		} else {
			widen("%s raised from %s to %s", name, b.Written, h.Written)
		}
	case h.Value < b.Value:
		narrow("%s lowered from %s to %s", name, b.Written, h.Written)
	}
}

func quoteWord(s string) string {
	if s == "" {
		return `""`
	}
	return s
}

// missingHardening judges an argv with nothing to compare against (a node new in HEAD, or one that had no argv in
// BASE) by the floor every argv kewplan writes meets.
func missingHardening(h hardening) []string {
	if !h.Parsed {
		return []string{"the argv is not a docker run command kewplan can read, so none of its hardening can be verified"}
	}
	var out []string
	if !h.ReadOnly {
		out = append(out, "no --read-only: the root filesystem is writable")
	}
	if !h.CapDropAll {
		out = append(out, "no --cap-drop ALL: the container keeps Docker's default capabilities")
	}
	if !h.NoNewPrivileges {
		out = append(out, "no --security-opt no-new-privileges: setuid binaries can raise the agent's privileges")
	}
	if !h.PidsLimit.Set || h.PidsLimit.Bad || math.IsInf(h.PidsLimit.Value, 1) {
		out = append(out, "no --pids-limit: nothing bounds a fork bomb")
	}
	for _, c := range compareHardening(hardening{Parsed: true, ReadOnly: h.ReadOnly, CapDropAll: h.CapDropAll,
		NoNewPrivileges: h.NoNewPrivileges, Tmpfs: h.Tmpfs, TmpfsOptions: h.TmpfsOptions}, h) {
		if c.widening {
			out = append(out, c.text)
		}
	}
	return out
}
