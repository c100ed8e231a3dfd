package planfile

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/internal/jsonlimit"
	"github.com/kewplan/kewplan/internal/safefile"
	"github.com/kewplan/kewplan/internal/termsafe"
	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/planner"
)

// Origin is what a plan was made from, as given on the command line: paths are relative to the working
// directory (or absolute).
type Origin struct {
	Config    string   // the configuration, a file or a directory
	Targets   []string // the --target names; empty: all nodes
	Policy    string   // the --policy file, or ""
	PolicySrc []byte   // the --policy file's content as it was read for the plan
}

// Write records p's inputs and origin in doc.Saved, with paths relative to the plan file's directory, and writes
// doc to path as gzip-compressed indented JSON readable only by its owner (variable values may be secrets). The
// file is replaced atomically, so a reader never sees half a plan. Compressed, a plan of 10,000 nodes is a few
// hundred kilobytes rather than 19 MB (every node repeats most of its argv); `gzip -dc FILE` shows the JSON.
func Write(path string, doc *jsonplan.Document, p *planner.Plan, o Origin) error {
	planDir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("write saved plan: %w", err)
	}
	saved := jsonplan.NewSavedState(p, o.Targets)
	cfgAbs, err := filepath.Abs(o.Config)
	if err != nil {
		return fmt.Errorf("write saved plan: %w", err)
	}
	rel, err := filepath.Rel(planDir, cfgAbs)
	if err != nil {
		rel = cfgAbs
	}
	saved.ConfigPath = filepath.ToSlash(rel)
	if o.Policy != "" {
		polAbs, err := filepath.Abs(o.Policy)
		if err != nil {
			return fmt.Errorf("write saved plan: %w", err)
		}
		saved.Policy = &jsonplan.SavedPolicy{Path: filepath.ToSlash(polAbs), SHA256: planner.SHA256Hex(o.PolicySrc)}
		if rel, err := filepath.Rel(planDir, polAbs); err == nil {
			saved.Policy.Path = filepath.ToSlash(rel)
		}
	}
	doc.Saved = nil
	sum, err := nodesDigest(doc)
	if err != nil {
		return fmt.Errorf("write saved plan: %w", err)
	}
	saved.NodesDigest = sum
	doc.Saved = saved

	tmp, err := os.CreateTemp(filepath.Dir(path), ".kewplan-plan-*")
	if err != nil {
		return fmt.Errorf("write saved plan: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	// The indented document is streamed through gzip into the file: the bytes of encoding it whole, without
	// holding a large plan's text (tens of megabytes) at once.
	bw := bufio.NewWriter(tmp)
	zw, _ := gzip.NewWriterLevel(bw, gzip.BestSpeed) // the level is valid
	err = doc.WriteIndented(zw)
	if err == nil {
		err = zw.Close()
	}
	if err == nil {
		err = bw.Flush()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write saved plan %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write saved plan %s: %w", path, err)
	}
	return nil
}

// File is a plan document read from a file: a saved plan, or the output of `kewplan plan --json` (Doc.Saved is
// nil then). The paths its saved object records are relative to the file's directory.
type File struct {
	Doc *jsonplan.Document
	dir string
	// digest is SHA-256 over the JSON that was decoded into Doc (DigestPrefix first): what an approval signs.
	digest string
	// policy is the organisation policy apply was given (EnforcePolicy), used instead of the one the plan names.
	policy string
}

// ReadSaved reads a plan file written by Write. A `plan --json` document without a saved object is refused: it
// records neither the configuration nor the variables needed to apply it.
func ReadSaved(path string) (*File, error) {
	f, err := Read(path)
	if err != nil {
		return nil, err
	}
	if f.Doc.Saved == nil {
		return nil, fmt.Errorf("read saved plan %s: it has no \"saved\" object; write plan files with kewplan plan --out FILE (plan --json output cannot be applied)", path)
	}
	return f, nil
}

// MaxBytes bounds a plan's JSON, in the file and once decompressed: a plan of 10,000 nodes is about 20 MiB of
// JSON (and a few hundred kilobytes compressed), so three times that is room to grow, and reading a plan, or
// refusing one that inflates to gigabytes, stays well within 256 MiB of memory.
const MaxBytes = 64 << 20

// Read reads a plan document: a saved plan, or the output of `kewplan plan --json`. The file must be a regular
// file (a FIFO is refused, not waited on) within MaxBytes, nested no deeper than jsonlimit.DefaultMaxDepth, and
// decoded strictly (jsonplan.Decode: a duplicate, case-folded or unknown key is refused with its JSON path).
func Read(path string) (*File, error) {
	b, err := safefile.Read(path, MaxBytes)
	if err != nil {
		return nil, fmt.Errorf("read plan: %w", err)
	}
	if b, err = Decompress(b, MaxBytes); err != nil {
		return nil, fmt.Errorf("read plan %s: %w", path, err)
	}
	if err := jsonlimit.Check(b, jsonlimit.Limits{}); err != nil {
		return nil, fmt.Errorf("read plan %s: not a kewplan plan file: %w", path, err)
	}
	doc, err := jsonplan.Decode(b)
	var de *jsonplan.DecodeError
	switch {
	case errors.As(err, &de):
		return nil, fmt.Errorf("read plan %s: not a kewplan plan file: %v. Do not apply or approve it; run kewplan plan again", path, de.Err)
	case err != nil:
		return nil, fmt.Errorf("read plan %s: %w", path, err)
	}
	return &File{Doc: doc, dir: filepath.Dir(path), digest: bytesDigest(b)}, nil
}

// ErrInflated is wrapped by Decompress's error for a compressed plan whose content is larger than the bound it
// was given: a small hostile file (a megabyte that inflates to gigabytes) is refused once that much is read, never
// read whole.
var ErrInflated = errors.New("the plan is larger than kewplan reads once decompressed")

// Decompress returns the JSON of a plan file: b itself when it is not gzip-compressed (plan files written before
// compression, and plan --json output), else its decompressed content, which may be at most max bytes (the
// bound of an uncompressed plan file, MaxBytes). The content is read in chunks and counted as it streams:
// decompression stops at max+1 bytes with an error wrapping ErrInflated, having held no more than that.
func Decompress(b []byte, max int) ([]byte, error) {
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		return b, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("not a kewplan plan file: its gzip header is damaged (%v)", err)
	}
	// gzip's trailer records the content's size (modulo 4 GiB), written by whoever made the file: a hint for the
	// first chunk only, never trusted beyond the bound.
	first := inflateChunk
	if n := len(b); n >= 4 {
		if hint := int(binary.LittleEndian.Uint32(b[n-4:])); hint >= 0 && hint < max {
			first = hint + 1
		}
	}
	var chunks [][]byte
	total := 0
	for size := first; ; size = inflateChunk {
		if total+size > max+1 {
			size = max + 1 - total
		}
		c := make([]byte, size)
		n, err := io.ReadFull(zr, c)
		chunks, total = append(chunks, c[:n]), total+n
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("not a kewplan plan file: its gzip content is damaged (%v)", err)
		}
		if total > max {
			return nil, fmt.Errorf("%w: a %d KiB file holds over %d MiB of JSON (a plan of 10,000 nodes is about 20 MiB); it is not a plan kewplan wrote",
				ErrInflated, len(b)>>10, max>>20)
		}
	}
	if len(chunks) == 1 {
		return chunks[0], nil
	}
	return bytes.Join(chunks, nil), nil
}

// inflateChunk is how much Decompress reads at a time once the size hint is used up or wrong.
const inflateChunk = 4 << 20

// ConfigLocation is the configuration path to load, relative to the working directory (or absolute); "" when the
// document has no saved object.
func (f *File) ConfigLocation() string {
	if f.Doc.Saved == nil {
		return ""
	}
	return filepath.Join(f.dir, filepath.FromSlash(f.Doc.Saved.ConfigPath))
}

// PolicyLocation is the --policy file to load, relative to the working directory (or absolute); "" when none:
// the one EnforcePolicy was given, else the one the plan names.
func (f *File) PolicyLocation() string {
	if f.policy != "" {
		return f.policy
	}
	if f.Doc.Saved == nil || f.Doc.Saved.Policy == nil {
		return ""
	}
	return filepath.Join(f.dir, filepath.FromSlash(f.Doc.Saved.Policy.Path))
}

// ErrStale is wrapped by CheckStale's error.
var ErrStale = errors.New("Saved plan is stale")

// CheckStale recomputes the config digest from the configuration and the recorded variable values and compares
// it with the plan's. The error wraps ErrStale and names every file that changed, appeared or disappeared.
func (f *File) CheckStale() error {
	cfg, err := f.loadConfig(config.Load)
	if err != nil {
		return err
	}
	return f.checkStale(cfg, false)
}

// loadConfig loads the configuration the plan was made from with load (config.Load or config.LoadForPlanning);
// one that no longer loads makes the plan stale.
func (f *File) loadConfig(load func(string) (*config.Config, hcl.Diagnostics)) (*config.Config, error) {
	if f.Doc.Saved == nil {
		return nil, fmt.Errorf("%w: the plan has no saved state to check", ErrStale)
	}
	loc := f.ConfigLocation()
	cfg, diags := load(loc)
	if diags.HasErrors() || cfg == nil {
		return nil, fmt.Errorf("%w: the configuration %s no longer loads (%s). Run kewplan plan again", ErrStale, termsafe.String(loc), firstError(diags))
	}
	return cfg, nil
}

// checkStale is CheckStale on a loaded configuration. With deferred (cfg from config.LoadForPlanning) the load's
// value check is made only when something changed: that check reads nothing but the configuration's files, so
// with them unchanged it passes as it did when the plan was saved.
func (f *File) checkStale(cfg *config.Config, deferred bool) error {
	doc, s := f.Doc, f.Doc.Saved
	current := currentFiles(cfg, s.Files)
	changes := diffFiles(s.Files, current)
	if s.Policy != nil {
		b, err := safefile.Read(f.PolicyLocation(), config.MaxPolicyFileBytes)
		switch {
		case err != nil:
			changes = append(changes, fmt.Sprintf("policy file %s cannot be read (%v)", s.Policy.Path, errors.Unwrap(err)))
		case planner.SHA256Hex(b) != s.Policy.SHA256:
			changes = append(changes, fmt.Sprintf("policy file %s changed", s.Policy.Path))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Variables)) {
		if _, ok := s.Variables[name]; !ok {
			changes = append(changes, fmt.Sprintf("variable %q was added", name))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.Variables)) {
		if _, ok := cfg.Variables[name]; !ok {
			changes = append(changes, fmt.Sprintf("variable %q was removed", name))
		}
	}
	if len(changes) > 0 && deferred {
		if d := cfg.CheckValues(nil); d.HasErrors() {
			config.SortDiagnostics(d)
			return fmt.Errorf("%w: the configuration %s no longer loads (%s). Run kewplan plan again", ErrStale, termsafe.String(f.ConfigLocation()), firstError(d))
		}
	}
	recomputed := (&planner.DigestInputs{Files: current, Variables: s.Variables}).Digest()
	if len(changes) == 0 && recomputed != doc.ConfigDigest {
		return fmt.Errorf("%w: its recorded files and variable values do not match its config_digest, so the plan file was edited. Run kewplan plan again and review the new plan", ErrStale)
	}
	if len(changes) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s since it was saved. Run kewplan plan again and review the new plan", ErrStale, termsafe.String(strings.Join(changes, "; ")))
}

// firstError names the first error of diags, with its file when it has one, escaped for a terminal.
func firstError(diags hcl.Diagnostics) string {
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			if d.Subject != nil {
				return termsafe.String(fmt.Sprintf("%s: %s", d.Subject.Filename, d.Summary))
			}
			return termsafe.String(d.Summary)
		}
	}
	return "it does not load"
}

// currentFiles digests, as they are now, the configuration's files and every file the plan recorded as read by
// file() or templatefile() ("missing" when it can no longer be read).
func currentFiles(cfg *config.Config, recorded []planner.FileDigest) []planner.FileDigest {
	current := planner.ConfigFileDigests(cfg.Dir, cfg.Files)
	for _, f := range recorded {
		if f.Kind != planner.FileRead {
			continue
		}
		b, err := fs.ReadFile(config.DirFS(cfg.Dir), f.Name)
		sum := "missing"
		if err == nil {
			sum = planner.SHA256Hex(b)
		}
		current = append(current, planner.FileDigest{Name: f.Name, Kind: planner.FileRead, SHA256: sum})
	}
	planner.SortFileDigests(current)
	return current
}

// diffFiles describes how the current files differ from the recorded ones.
func diffFiles(saved, current []planner.FileDigest) []string {
	key := func(f planner.FileDigest) string { return f.Kind + "\x00" + f.Name }
	was := map[string]planner.FileDigest{}
	for _, f := range saved {
		was[key(f)] = f
	}
	now := map[string]planner.FileDigest{}
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

// Load loads what a saved plan was made from, for apply to re-plan it after CheckStale passed: the configuration
// and the planner Inputs (recorded variables, targets, policy, and file access rooted at the configuration).
func (f *File) Load() (*config.Config, planner.Inputs, error) {
	if f.Doc.Saved == nil {
		return nil, planner.Inputs{}, errors.New("the plan has no saved state")
	}
	cfg, diags := config.Load(f.ConfigLocation())
	if diags.HasErrors() || cfg == nil {
		return nil, planner.Inputs{}, fmt.Errorf("%w: the configuration no longer loads", ErrStale)
	}
	in, err := f.inputs(cfg)
	return cfg, in, err
}

// inputs are the planner Inputs the plan was made with, for cfg.
func (f *File) inputs(cfg *config.Config) (planner.Inputs, error) {
	s := f.Doc.Saved
	vars, err := s.Vars()
	if err != nil {
		return planner.Inputs{}, fmt.Errorf("saved plan variables: %w", err)
	}
	in := planner.Inputs{Vars: vars, FS: config.DirFS(cfg.Dir), Targets: s.Targets}
	if loc := f.PolicyLocation(); loc != "" {
		pol, _, diags := config.LoadPolicyFile(loc)
		if diags.HasErrors() {
			return planner.Inputs{}, fmt.Errorf("%w: the policy file %s no longer loads", ErrStale, termsafe.String(loc))
		}
		in.Policy = pol
	}
	return in, nil
}

// Reload is what `apply PLANFILE` runs: it refuses a stale plan (CheckStale), re-plans from the recorded
// configuration and variables, and refuses a plan file that differs from that re-plan in anything but what is by
// nature of the moment it was written (compareDocuments), so the containers that run, and everything show
// displayed about them, are exactly what was reviewed. A plan file that does not match itself (CheckIntegrity) is refused first.
func (f *File) Reload() (*config.Config, *planner.Plan, error) {
	if err := f.CheckIntegrity(); err != nil {
		return nil, nil, err
	}
	// The configuration is loaded once, for the staleness check and the re-plan, without the load's value check
	// (config.LoadForPlanning): unchanged files pass it as they did when the plan was saved (see checkStale).
	cfg, err := f.loadConfig(config.LoadForPlanning)
	if err != nil {
		return nil, nil, err
	}
	if err := f.checkStale(cfg, true); err != nil {
		return nil, nil, err
	}
	in, err := f.inputs(cfg)
	if err != nil {
		return nil, nil, err
	}
	p, diags := planner.Build(cfg, in)
	if diags.HasErrors() {
		return nil, nil, fmt.Errorf("%w: the configuration no longer plans cleanly. Run kewplan plan again", ErrStale)
	}
	// What the plan did not evaluate is checked as plan checks it (a kewplan newer than the plan may check more).
	if d := cfg.CheckValues(p.PlannedBlocks()); d.HasErrors() {
		config.SortDiagnostics(d)
		return nil, nil, fmt.Errorf("%w: the configuration %s no longer loads (%s). Run kewplan plan again", ErrStale, termsafe.String(f.ConfigLocation()), firstError(d))
	}
	// What apply runs is compared first, with the most precise messages; then every other field, so that what
	// show displays (budgets, retry policies, roles, pull requests, the Kubernetes objects, the diagnostics) is
	// what the configuration plans too.
	fresh, renderDiags := freshDocument(f.Doc, cfg, p)
	if err := compareNodes(f.Doc, fresh); err != nil {
		return nil, nil, err
	}
	if err := compareDocuments(f.Doc, fresh, renderDiags); err != nil {
		return nil, nil, err
	}
	return cfg, p, nil
}
