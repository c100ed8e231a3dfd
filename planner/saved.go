package planner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/internal/jsonlimit"
	"github.com/kewplan/kewplan/internal/safefile"
)

// SavedState is the `saved` object of a saved plan: what `apply PLANFILE` needs to re-plan exactly the reviewed
// configuration and to refuse it once anything the digest covers has changed.
type SavedState struct {
	// ConfigPath is the configuration (file or directory), relative to the plan file's directory, with forward
	// slashes, so a checkout can move without invalidating its plan files.
	ConfigPath string `json:"config_path"`
	// Variables are the variable values the plan used, canonical JSON (see EncodeVariables).
	Variables map[string]json.RawMessage `json:"variables"`
	// Files are the digests of every configuration file and every file read by file() or templatefile().
	Files []FileDigest `json:"files"`
	// Targets are the --target names the plan was made with; empty: all nodes.
	Targets []string `json:"targets"`
	// Policy is the organisation policy file given with --policy, if any: applying the plan enforces it again,
	// and a change to it makes the plan stale like a change to the configuration.
	Policy *SavedPolicy `json:"policy,omitempty"`

	configArg string // the configuration path as the user gave it (relative to the working directory)
	dir       string // the plan file's directory, once written or read
}

// NewSavedState records the inputs of p; configPath is the configuration path as given on the command line.
func NewSavedState(p *Plan, configPath string, targets []string) *SavedState {
	vars := p.DigestInputs.Variables
	if vars == nil {
		vars = map[string]json.RawMessage{}
	}
	return &SavedState{
		Variables: vars,
		Files:     append([]FileDigest{}, p.DigestInputs.Files...),
		Targets:   nonNil(targets),
		configArg: configPath,
	}
}

// SavedPolicy records a --policy file: its path (relative to the plan file's directory once written, with
// forward slashes) and the sha256 of its bytes.
type SavedPolicy struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`

	arg string // the path as the user gave it
}

// WithPolicy records the --policy file the plan was made with; src is its content as read.
func (s *SavedState) WithPolicy(path string, src []byte) *SavedState {
	s.Policy = &SavedPolicy{Path: filepath.ToSlash(path), SHA256: sha256Hex(src), arg: path}
	return s
}

// PolicyLocation is the --policy file to load, relative to the working directory (or absolute); "" when none.
func (s *SavedState) PolicyLocation() string {
	switch {
	case s.Policy == nil:
		return ""
	case s.dir == "" && s.Policy.arg != "":
		return s.Policy.arg
	case s.dir == "":
		return filepath.FromSlash(s.Policy.Path)
	}
	return filepath.Join(s.dir, filepath.FromSlash(s.Policy.Path))
}

// ConfigLocation is the configuration path to load, relative to the working directory (or absolute).
func (s *SavedState) ConfigLocation() string {
	if s.dir == "" {
		if s.configArg != "" {
			return s.configArg
		}
		return filepath.FromSlash(s.ConfigPath)
	}
	return filepath.Join(s.dir, filepath.FromSlash(s.ConfigPath))
}

// Vars decodes the recorded variable values.
func (s *SavedState) Vars() (map[string]cty.Value, error) { return DecodeVariables(s.Variables) }

// WriteSaved writes doc, which must carry Saved, to path as indented JSON readable only by its owner (variable
// values may be secrets). The file is replaced atomically, so a reader never sees half a plan.
func WriteSaved(path string, doc *Document) error {
	if doc.Saved == nil {
		return errors.New("write saved plan: the document has no saved state")
	}
	planDir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("write saved plan: %w", err)
	}
	cfgAbs, err := filepath.Abs(doc.Saved.ConfigLocation())
	if err != nil {
		return fmt.Errorf("write saved plan: %w", err)
	}
	rel, err := filepath.Rel(planDir, cfgAbs)
	if err != nil {
		rel = cfgAbs
	}
	doc.Saved.ConfigPath = filepath.ToSlash(rel)
	if pol := doc.Saved.Policy; pol != nil {
		polAbs, err := filepath.Abs(doc.Saved.PolicyLocation())
		if err != nil {
			return fmt.Errorf("write saved plan: %w", err)
		}
		if rel, err := filepath.Rel(planDir, polAbs); err == nil {
			pol.Path = filepath.ToSlash(rel)
		} else {
			pol.Path = filepath.ToSlash(polAbs)
		}
	}
	doc.Saved.dir = filepath.Dir(path)

	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("write saved plan: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".kewplan-plan-*")
	if err != nil {
		return fmt.Errorf("write saved plan: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		tmp.Close()
		return fmt.Errorf("write saved plan %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write saved plan %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write saved plan %s: %w", path, err)
	}
	return nil
}

// ReadSaved reads a plan file written by WriteSaved. A `plan --json` document without a saved object is refused:
// it records neither the configuration nor the variables needed to apply it.
func ReadSaved(path string) (*Document, error) {
	doc, err := ReadDocument(path)
	if err != nil {
		return nil, err
	}
	if doc.Saved == nil {
		return nil, fmt.Errorf("read saved plan %s: it has no \"saved\" object; write plan files with kewplan plan --out FILE (plan --json output cannot be applied)", path)
	}
	return doc, nil
}

// MaxPlanFileBytes bounds a plan file: a 10,000-node plan is a few megabytes.
const MaxPlanFileBytes = 256 << 20

// ReadDocument reads a plan document: a saved plan, or the output of `kewplan plan --json`. The file must be a
// regular file (a FIFO is refused, not waited on) within MaxPlanFileBytes, nested no deeper than
// jsonlimit.DefaultMaxDepth.
func ReadDocument(path string) (*Document, error) {
	b, err := safefile.Read(path, MaxPlanFileBytes)
	if err != nil {
		return nil, fmt.Errorf("read plan: %w", err)
	}
	if err := jsonlimit.Check(b, jsonlimit.Limits{}); err != nil {
		return nil, fmt.Errorf("read plan %s: not a kewplan plan file: %w", path, err)
	}
	var doc Document
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("read plan %s: not a kewplan plan file: %v", path, err)
	}
	if err := doc.Check(); err != nil {
		return nil, fmt.Errorf("read plan %s: %w", path, err)
	}
	if doc.Saved != nil {
		doc.Saved.dir = filepath.Dir(path)
		if doc.Saved.Variables == nil {
			doc.Saved.Variables = map[string]json.RawMessage{}
		}
	}
	return &doc, nil
}

// ErrStale is wrapped by CheckStale's error.
var ErrStale = errors.New("Saved plan is stale")

// CheckStale recomputes the config digest from the configuration and the recorded variable values and compares
// it with the plan's. The error wraps ErrStale and names every file that changed, appeared or disappeared.
func CheckStale(doc *Document) error {
	if doc.Saved == nil {
		return fmt.Errorf("%w: the plan has no saved state to check", ErrStale)
	}
	s := doc.Saved
	loc := s.ConfigLocation()
	cfg, diags := config.Load(loc)
	if diags.HasErrors() || cfg == nil {
		msg := "it does not load"
		for _, d := range diags {
			if d.Severity == hcl.DiagError {
				msg = d.Summary
				if d.Subject != nil {
					msg = fmt.Sprintf("%s: %s", d.Subject.Filename, d.Summary)
				}
				break
			}
		}
		return fmt.Errorf("%w: the configuration %s no longer loads (%s). Run kewplan plan again", ErrStale, loc, msg)
	}
	current := configFileDigests(cfg.Dir, cfg.Files)
	for _, f := range s.Files {
		if f.Kind != FileRead {
			continue
		}
		b, err := fs.ReadFile(config.DirFS(cfg.Dir), f.Name)
		sum := "missing"
		if err == nil {
			sum = sha256Hex(b)
		}
		current = append(current, FileDigest{Name: f.Name, Kind: FileRead, SHA256: sum})
	}
	sortFileDigests(current)
	changes := diffFiles(s.Files, current)
	if s.Policy != nil {
		b, err := safefile.Read(s.PolicyLocation(), config.MaxPolicyFileBytes)
		switch {
		case err != nil:
			changes = append(changes, fmt.Sprintf("policy file %s cannot be read (%v)", s.Policy.Path, errors.Unwrap(err)))
		case sha256Hex(b) != s.Policy.SHA256:
			changes = append(changes, fmt.Sprintf("policy file %s changed", s.Policy.Path))
		}
	}
	for _, name := range sortedKeys(cfg.Variables) {
		if _, ok := s.Variables[name]; !ok {
			changes = append(changes, fmt.Sprintf("variable %q was added", name))
		}
	}
	for _, name := range sortedKeys(s.Variables) {
		if _, ok := cfg.Variables[name]; !ok {
			changes = append(changes, fmt.Sprintf("variable %q was removed", name))
		}
	}
	recomputed := (&DigestInputs{Files: current, Variables: s.Variables}).Digest()
	if len(changes) == 0 && recomputed != doc.ConfigDigest {
		return fmt.Errorf("%w: its recorded files and variable values do not match its config_digest, so the plan file was edited. Run kewplan plan again and review the new plan", ErrStale)
	}
	if len(changes) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s since it was saved. Run kewplan plan again and review the new plan", ErrStale, strings.Join(changes, "; "))
}

// diffFiles describes how the current files differ from the recorded ones.
func diffFiles(saved, current []FileDigest) []string {
	key := func(f FileDigest) string { return f.Kind + "\x00" + f.Name }
	was := map[string]FileDigest{}
	for _, f := range saved {
		was[key(f)] = f
	}
	now := map[string]FileDigest{}
	for _, f := range current {
		now[key(f)] = f
	}
	var out []string
	for _, f := range current {
		old, ok := was[key(f)]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("configuration file %s was added", f.Name))
		case f.SHA256 == "missing":
			out = append(out, fmt.Sprintf("%s was removed", f.Name))
		case old.SHA256 != f.SHA256:
			out = append(out, fmt.Sprintf("%s changed", f.Name))
		}
	}
	for _, f := range saved {
		if _, ok := now[key(f)]; !ok {
			out = append(out, fmt.Sprintf("configuration file %s was removed", f.Name))
		}
	}
	sort.Strings(out)
	return out
}

// LoadSaved loads what a saved plan was made from, for apply to re-plan it after CheckStale passed: the
// configuration and the Inputs (recorded variables, targets, and file access rooted at the configuration).
func LoadSaved(doc *Document) (*config.Config, Inputs, error) {
	if doc.Saved == nil {
		return nil, Inputs{}, errors.New("the plan has no saved state")
	}
	cfg, diags := config.Load(doc.Saved.ConfigLocation())
	if diags.HasErrors() || cfg == nil {
		return nil, Inputs{}, fmt.Errorf("%w: the configuration no longer loads", ErrStale)
	}
	vars, err := doc.Saved.Vars()
	if err != nil {
		return nil, Inputs{}, fmt.Errorf("saved plan variables: %w", err)
	}
	in := Inputs{Vars: vars, FS: config.DirFS(cfg.Dir), Targets: doc.Saved.Targets}
	if loc := doc.Saved.PolicyLocation(); loc != "" {
		pol, _, diags := config.LoadPolicyFile(loc)
		if diags.HasErrors() {
			return nil, Inputs{}, fmt.Errorf("%w: the policy file %s no longer loads", ErrStale, loc)
		}
		in.Policy = pol
	}
	return cfg, in, nil
}

// Reload is what `apply PLANFILE` runs: it refuses a stale plan (CheckStale), re-plans from the recorded
// configuration and variables, and refuses a plan file whose nodes no longer match that re-plan (argv,
// credentials, image, prompt digest), so the containers that run are exactly the ones that were reviewed.
func Reload(doc *Document) (*config.Config, *Plan, error) {
	if err := CheckStale(doc); err != nil {
		return nil, nil, err
	}
	cfg, in, err := LoadSaved(doc)
	if err != nil {
		return nil, nil, err
	}
	p, diags := Build(cfg, in)
	if diags.HasErrors() {
		return nil, nil, fmt.Errorf("%w: the configuration no longer plans cleanly. Run kewplan plan again", ErrStale)
	}
	fresh := NewDocument(p, doc.KewplanVersion)
	if len(fresh.Nodes) != len(doc.Nodes) {
		return nil, nil, fmt.Errorf("%w: it holds %d nodes, and the configuration plans %d, so the plan file was edited. Run kewplan plan again", ErrStale, len(doc.Nodes), len(fresh.Nodes))
	}
	for i := range fresh.Nodes {
		a, b := &doc.Nodes[i], &fresh.Nodes[i]
		same := a.Name == b.Name && a.Image == b.Image && a.Prompt == b.Prompt &&
			slices.Equal(a.Argv, b.Argv) && slices.Equal(a.Credentials, b.Credentials)
		if !same {
			return nil, nil, fmt.Errorf("%w: node %q in the plan file differs from what its configuration plans, so the plan file was edited. Run kewplan plan again", ErrStale, a.Name)
		}
	}
	return cfg, p, nil
}
