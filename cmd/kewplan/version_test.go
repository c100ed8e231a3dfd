package main

import (
	"runtime/debug"
	"testing"
)

// TestVersionFromBuildInfo: an unstamped build reports the module's version, or the commit, its time and whether
// the tree was modified, so that two builds are told apart; a stamped build reports its stamp.
func TestVersionFromBuildInfo(t *testing.T) {
	vcs := func(rev, at, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev},
			{Key: "vcs.time", Value: at}, {Key: "vcs.modified", Value: modified}}
	}
	const rev = "8f5b00c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7"
	for _, tc := range []struct {
		name    string
		stamped string
		info    *debug.BuildInfo
		want    string
	}{
		{"stamped", "1.2.3", &debug.BuildInfo{Main: debug.Module{Version: "v9.9.9"}}, "1.2.3"},
		{"go install at a tag", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.3.0"}}, "0.3.0"},
		{"devel with vcs", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "2026-12-07T13:55:00Z", "false")},
			"0.1.0-dev+20261207T135500Z.8f5b00c1d2e3"},
		{"devel, modified", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "2026-12-07T13:55:00Z", "true")},
			"0.1.0-dev+20261207T135500Z.8f5b00c1d2e3.dirty"},
		{"no vcs", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "0.1.0-dev"},
		{"no build info", "", nil, "0.1.0-dev"},
	} {
		got := versionFrom(tc.stamped, func() (*debug.BuildInfo, bool) { return tc.info, tc.info != nil })
		if got != tc.want {
			t.Errorf("%s: versionFrom() = %q, want %q", tc.name, got, tc.want)
		}
	}
}
