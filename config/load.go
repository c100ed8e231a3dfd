package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/kewplan/kewplan/internal/safefile"
)

// FileExtension is the suffix of configuration files.
const FileExtension = ".hcl"

// maxConfigFileBytes bounds one configuration file: configurations are small, and a stray multi-gigabyte file
// named *.hcl must not exhaust memory.
const maxConfigFileBytes = 8 << 20

// Load reads path: one .hcl file, or a directory whose *.hcl files (not recursive) form one configuration.
// The returned Config is never nil: even when the diagnostics hold errors it carries the sources read so far
// (Files), so that diagnostics can be rendered with snippets. Its contents are only meaningful without errors.
func Load(path string) (*Config, hcl.Diagnostics) {
	return load(path, false)
}

// LoadForPlanning is Load for a caller that plans the configuration next. Load's last check evaluates every
// node's attributes with all variables, node outputs and files unknown; planning evaluates them again with the
// variables' values, and where it does, the first evaluation finds no error that the second misses (see
// CheckValues). So when the configuration loads without error, that check is left to the caller, who must call
// CheckValues after planning. When the load fails, the check has been made: the diagnostics are Load's.
func LoadForPlanning(path string) (*Config, hcl.Diagnostics) {
	return load(path, true)
}

func load(path string, deferValues bool) (*Config, hcl.Diagnostics) {
	cfg := newConfig(path)
	names, diags := configFileNames(path)
	if diags.HasErrors() {
		return cfg, diags
	}
	if info, err := os.Stat(path); err == nil && !info.IsDir() {
		cfg.Dir = filepath.Dir(path)
		// A configuration file reached through a symbolic link belongs to the directory the link leads to: its
		// file() paths were written relative to that directory, not to the link's.
		if li, err := os.Lstat(path); err == nil && li.Mode()&fs.ModeSymlink != 0 {
			if resolved, err := filepath.EvalSymlinks(path); err == nil {
				cfg.Resolved = resolved
				cfg.Dir = filepath.Dir(resolved)
				names = []string{resolved}
			}
		}
	}

	var bodies []*hclsyntax.Body
	parsed := true
	for _, f := range readAndParse(cfg.Dir, names) {
		if err := f.err; err != nil {
			parsed = false
			hint := "Check that the file exists and is readable."
			if errors.Is(err, safefile.ErrNotRegular) {
				hint = fmt.Sprintf("Configuration files must be regular files: remove it, or rename it so that its name does not end in %s.", FileExtension)
			} else if errors.Is(err, safefile.ErrTooLarge) {
				hint = "Check that the path names the configuration."
			}
			diags = append(diags, errorDiag("Cannot read configuration file",
				fmt.Sprintf("Reading %s failed: %s. %s", f.path, describeFSError(err), hint),
				hcl.Range{}))
			continue
		}
		cfg.Files[f.name] = f.src
		diags = append(diags, f.diags...)
		if f.diags.HasErrors() {
			parsed = false
			// A file that does not parse would only produce confusing follow-on errors from its partial body.
			continue
		}
		bodies = append(bodies, f.body)
	}
	for _, body := range bodies {
		diags = append(diags, cfg.decodeFile(body)...)
	}
	if parsed {
		// Whole-configuration checks need every file; with one missing they would report its declarations as
		// undeclared. Evaluating with unresolved references would only repeat them as evaluation errors.
		refs := cfg.checkStatic()
		diags = append(diags, refs...)
		diags = append(diags, cfg.checkNodePrivateHosts()...)
		if !refs.HasErrors() && (!deferValues || diags.HasErrors()) {
			diags = append(diags, cfg.CheckValues(nil)...)
		}
	}
	SortDiagnostics(diags)
	return cfg, diags
}

// relativeName names path relative to dir, with forward slashes; the base name when it is not inside dir.
func relativeName(dir, path string) string {
	if rel, err := filepath.Rel(dir, path); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return filepath.ToSlash(rel)
	}
	return filepath.Base(path)
}

// parsedFile is one configuration file read and parsed.
type parsedFile struct {
	path  string // as found on disk
	name  string // relative to the configuration's directory: what ranges and the saved plan say
	src   []byte
	body  *hclsyntax.Body
	diags hcl.Diagnostics
	err   error // reading failed
}

// readAndParse reads and parses the named files, concurrently when there are several (parsing is most of
// what loading costs), and returns them in the order of names.
func readAndParse(dir string, names []string) []parsedFile {
	out := make([]parsedFile, len(names))
	one := func(i int) {
		f := &out[i]
		// Ranges, snippets and the saved plan name files relative to the configuration's directory, so that a
		// configuration planned from two checkouts (or via an absolute and a relative path) reads the same.
		f.path, f.name = names[i], relativeName(dir, names[i])
		if f.src, f.err = readConfigFile(f.path); f.err == nil {
			f.body, f.diags = parseConfigSource(f.name, f.src)
		}
	}
	if len(names) == 1 {
		one(0)
		return out
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			one(i)
		}()
	}
	wg.Wait()
	return out
}

func newConfig(path string) *Config {
	return &Config{
		Dir:       path,
		Files:     map[string][]byte{},
		Variables: map[string]*Variable{},
		Locals:    map[string]*Local{},
		Sandbox:   defaultSandbox(),
		Runners:   map[string]*Runner{},
		Nodes:     map[string]*Node{},
		Pricing:   map[string]*Pricing{},
		rejected:  map[string]bool{},
	}
}

// configFileNames lists the files that form the configuration at path, in name order.
func configFileNames(path string) ([]string, hcl.Diagnostics) {
	if path == "" {
		path = "."
	}
	info, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, hcl.Diagnostics{errorDiag("Configuration not found",
				fmt.Sprintf("The path %s does not exist. Give the path of a .hcl file, or of a directory holding .hcl files.", path),
				hcl.Range{})}
		}
		return nil, hcl.Diagnostics{errorDiag("Cannot read configuration",
			fmt.Sprintf("Reading %s failed: %s.", path, describeFSError(err)), hcl.Range{})}
	}
	if !info.IsDir() {
		if !strings.HasSuffix(path, FileExtension) {
			return nil, hcl.Diagnostics{errorDiag("Not a configuration file",
				fmt.Sprintf("The file %s does not end in %s. Configuration files are named *%s; rename the file or give the directory that holds the configuration.", path, FileExtension, FileExtension),
				hcl.Range{})}
		}
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, hcl.Diagnostics{errorDiag("Cannot read configuration directory",
			fmt.Sprintf("Listing %s failed: %s.", path, describeFSError(err)), hcl.Range{})}
	}
	var names []string
	for _, e := range entries {
		n := e.Name()
		// Hidden files are editor and tool droppings (.#lock files, swap files), never configuration.
		if !strings.HasSuffix(n, FileExtension) || strings.HasPrefix(n, ".") || e.IsDir() {
			continue
		}
		if e.Type()&fs.ModeSymlink != 0 {
			if fi, err := os.Stat(filepath.Join(path, n)); err == nil && fi.IsDir() {
				continue
			}
		}
		names = append(names, filepath.Join(path, n))
	}
	if len(names) == 0 {
		return nil, hcl.Diagnostics{errorDiag("No configuration files",
			fmt.Sprintf("The directory %s holds no %s files (subdirectories are not searched). Give the path of a directory that holds the configuration, or of one .hcl file.", path, FileExtension),
			hcl.Range{})}
	}
	return names, nil
}

// readConfigFile reads one configuration file without blocking: a FIFO or device named *.hcl is refused, not
// waited on.
func readConfigFile(name string) ([]byte, error) {
	return safefile.Read(name, maxConfigFileBytes)
}

// describeFSError drops the Go operation prefix ("open x: ") so the message reads as a sentence fragment.
func describeFSError(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	var se *safefile.Error
	if errors.As(err, &se) {
		return "it " + se.Reason
	}
	return err.Error()
}

// parseConfigSource checks the encoding and parses src as HCL native syntax.
func parseConfigSource(name string, src []byte) (*hclsyntax.Body, hcl.Diagnostics) {
	if d := checkUTF8(name, src); d != nil {
		return nil, hcl.Diagnostics{d}
	}
	if d := CheckNesting(name, src); d != nil {
		return nil, hcl.Diagnostics{d}
	}
	return parseBody(name, src)
}

// checkUTF8 reports the first byte of src that is not valid UTF-8.
func checkUTF8(name string, src []byte) *hcl.Diagnostic {
	if utf8.Valid(src) {
		return nil
	}
	pos := hcl.InitialPos
	for i := 0; i < len(src); {
		r, size := utf8.DecodeRune(src[i:])
		if r == utf8.RuneError && size <= 1 {
			end := pos
			end.Byte++
			end.Column++
			return errorDiag("Invalid UTF-8 encoding",
				fmt.Sprintf("%s holds a byte (0x%02x) that is not valid UTF-8. Configuration files must be UTF-8 text: re-save the file as UTF-8 (for example with iconv -t UTF-8).", name, src[i]),
				hcl.Range{Filename: name, Start: pos, End: end})
		}
		if r == '\n' {
			pos.Line++
			pos.Column = 1
		} else {
			pos.Column++
		}
		pos.Byte += size
		i += size
	}
	return nil
}
