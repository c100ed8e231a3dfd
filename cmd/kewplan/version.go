package main

import (
	"runtime/debug"
	"strings"

	"github.com/kewplan/kewplan/views"
)

// VersionCmd prints kewplan's version.
type VersionCmd struct{}

// Help shows an example.
func (VersionCmd) Help() string { return "Example:\n  kewplan version" }

// Run prints the version.
func (VersionCmd) Run(env *Env) error {
	views.NewView(env.streams()).Version(version)
	return nil
}

// devVersion is the version of a build that carries neither a stamped version nor a module version.
const devVersion = "0.1.0-dev"

// buildInfo is the binary's build information (runtime/debug.ReadBuildInfo); a variable so tests can replace it.
var buildInfo = func() (*debug.BuildInfo, bool) { return debug.ReadBuildInfo() }

// versionFrom is the version kewplan reports, so that two builds can be told apart in the ledger and receipts:
// the stamped one (make build's -ldflags); else the module's own version when the go command recorded one
// (go install module@v1.2.3, or a pseudo-version of the commit); else devVersion with the commit, its time
// and whether the tree was modified, from the VCS information the go command embeds:
// "0.1.0-dev+20261207T135500Z.8f5b00c1d2e3.dirty".
func versionFrom(stamped string, info func() (*debug.BuildInfo, bool)) string {
	if stamped != "" {
		return stamped
	}
	bi, ok := info()
	if !ok || bi == nil {
		return devVersion
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return strings.TrimPrefix(v, "v")
	}
	var rev, at string
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = strings.NewReplacer("-", "", ":", "").Replace(s.Value)
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return devVersion
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	meta := []string{}
	if at != "" {
		meta = append(meta, at)
	}
	meta = append(meta, rev)
	if dirty {
		meta = append(meta, "dirty")
	}
	return devVersion + "+" + strings.Join(meta, ".")
}
