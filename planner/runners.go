package planner

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/runners"
)

// Runner origins in a RunnerInfo.
const (
	RunnerBuiltin    = "builtin"    // shipped with kewplan, not changed by the configuration
	RunnerOverridden = "overridden" // a built-in whose credentials or args a runner block replaces
	RunnerCustom     = "custom"     // declared by a runner block
)

// RunnerInfo is one runner as a configuration sees it: `kewplan runners` lists them.
type RunnerInfo struct {
	Name              string   `json:"name"`
	Kind              string   `json:"kind"` // RunnerBuiltin, RunnerOverridden or RunnerCustom
	Protocol          string   `json:"protocol"`
	Credentials       []string `json:"credentials"`
	CredentialOrigins []string `json:"credential_origins"`
	// Declared is the runner block's position as "file:line"; "" for a built-in no block touches.
	Declared string `json:"declared"`
	// Image is the image the sandbox maps to the runner; "" when none (the runner cannot be contained).
	Image string `json:"image"`
	// Contained is false when kewplan would refuse to contain a node on this runner (no image, no credential).
	Contained bool `json:"contained"`
}

// ListRunners lists the built-in runners and the runners cfg declares, sorted by name. cfg may be nil: the
// built-ins alone.
func ListRunners(cfg *config.Config) []RunnerInfo {
	if cfg == nil {
		cfg = &config.Config{}
	}
	if cfg.Sandbox == nil {
		c := *cfg // never change the caller's configuration
		c.Sandbox = &config.Sandbox{}
		cfg = &c
	}
	b := newBuilder(cfg, Inputs{})
	names := map[string]bool{}
	for _, n := range runners.BuiltinNames() {
		names[n] = true
	}
	for n := range cfg.Runners {
		names[n] = true
	}
	out := make([]RunnerInfo, 0, len(names))
	for _, name := range slices.Sorted(maps.Keys(names)) {
		r := b.resolveRunner(name)
		if r == nil {
			continue
		}
		info := RunnerInfo{Name: name, Kind: RunnerBuiltin, Protocol: r.protocol,
			Credentials: nonNil(r.creds), CredentialOrigins: nonNil(r.origins)}
		if r.decl != nil {
			info.Kind = RunnerCustom
			if r.builtin != nil {
				info.Kind = RunnerOverridden
			}
			info.Declared = fmt.Sprintf("%s:%d", r.decl.DeclRange.Filename, r.decl.DeclRange.Start.Line)
		}
		switch {
		case cfg.Sandbox.Images[name] != "":
			info.Image = cfg.Sandbox.Images[name]
		case name == "claude-code" && cfg.Sandbox.Image != "":
			info.Image = cfg.Sandbox.Image
		}
		info.Contained = info.Image != "" && len(r.creds) > 0
		for _, c := range r.creds {
			if !credentialName.MatchString(c) {
				info.Contained = false
			}
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
