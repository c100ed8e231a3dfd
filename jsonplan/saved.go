package jsonplan

import (
	"encoding/json"

	"github.com/zclconf/go-cty/cty"

	"github.com/kewplan/kewplan/planner"
)

// SavedState is the `saved` object of a saved plan: what `apply PLANFILE` needs to re-plan exactly the reviewed
// configuration and to refuse it once anything the digest covers has changed. Package planfile writes and reads
// it; this is only its shape.
type SavedState struct {
	// ConfigPath is the configuration (file or directory), relative to the plan file's directory, with forward
	// slashes, so a checkout can move without invalidating its plan files.
	ConfigPath string `json:"config_path"`
	// Variables are the variable values the plan used, canonical JSON (see planner.EncodeVariables).
	Variables map[string]json.RawMessage `json:"variables"`
	// Files are the digests of every configuration file and every file read by file() or templatefile().
	Files []planner.FileDigest `json:"files"`
	// Targets are the --target names the plan was made with; empty: all nodes.
	Targets []string `json:"targets"`
	// Policy is the organisation policy file given with --policy, if any: applying the plan enforces it again,
	// and a change to it makes the plan stale like a change to the configuration.
	Policy *SavedPolicy `json:"policy,omitempty"`
	// NodesDigest is the SHA-256 of the rest of the document (everything but this saved object) as written, so
	// that show and apply notice a plan file edited by hand even without its configuration at hand; "" in a plan
	// written before it existed. It is no signature: it catches edits, not a forger who recomputes it (apply
	// re-plans from the configuration for that).
	NodesDigest string `json:"nodes_digest,omitempty"`
}

// NewSavedState records the inputs of p (its variable values and file digests) and its targets; the paths are
// filled in by whoever writes the plan file, relative to it.
func NewSavedState(p *planner.Plan, targets []string) *SavedState {
	vars := p.DigestInputs.Variables
	if vars == nil {
		vars = map[string]json.RawMessage{}
	}
	return &SavedState{
		Variables: vars,
		Files:     append([]planner.FileDigest{}, p.DigestInputs.Files...),
		Targets:   nonNil(targets),
	}
}

// SavedPolicy records a --policy file: its path (relative to the plan file's directory, with forward slashes)
// and the sha256 of its bytes.
type SavedPolicy struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// Vars decodes the recorded variable values.
func (s *SavedState) Vars() (map[string]cty.Value, error) {
	return planner.DecodeVariables(s.Variables)
}
