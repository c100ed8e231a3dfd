package main

import (
	"os"
	"path/filepath"

	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/planner"
)

// sarifPaths maps the file names of a plan's ranges to SARIF artifact URIs. Ranges name configuration files
// relative to the configuration's directory (so that plans are the same wherever they were made); code scanning
// wants paths relative to the repository root, the working directory of a CI job. So a configuration file's name
// is joined to the configuration's directory first. Other names (a --policy file, named as given) are kept.
type sarifPaths struct {
	dir string // the configuration's directory, relative to the working directory (or absolute); "" unknown
	// isConfig says whether a name is a configuration file's; nil: every relative name is one.
	isConfig func(name string) bool
}

// path is name as a path relative to the working directory (or absolute).
func (p *sarifPaths) path(name string) string {
	if p == nil || p.dir == "" || name == "" || name == "." || filepath.IsAbs(filepath.FromSlash(name)) {
		return name
	}
	if p.isConfig != nil && !p.isConfig(name) {
		return name
	}
	return filepath.Join(p.dir, filepath.FromSlash(name))
}

// uri is SARIFOptions.URI.
func (p *sarifPaths) uri(name string) string { return sarifURI(p.path(name)) }

// source is SARIFOptions.Source: the file's text, read through path.
func (p *sarifPaths) source(name string) ([]byte, bool) { return readRelativeSource(p.path(name)) }

// docConfigDir is the configuration directory a plan document was made from, relative to the working directory:
// from a saved plan's config_path (relative to the plan file, which is at planPath), else from the document's
// config_dir (relative to the working directory it was planned in); "" when neither says.
func docConfigDir(doc *jsonplan.Document, planPath string) string {
	if doc.Saved != nil && doc.Saved.ConfigPath != "" && planPath != "" && planPath != "-" {
		loc := filepath.Join(filepath.Dir(planPath), filepath.FromSlash(doc.Saved.ConfigPath))
		if info, err := os.Stat(loc); err == nil && !info.IsDir() {
			// A single configuration file: its directory, the one a symbolic link leads to.
			if real, err := filepath.EvalSymlinks(loc); err == nil {
				loc = real
			}
			loc = filepath.Dir(loc)
		}
		return loc
	}
	if doc.ConfigDir != "" && !filepath.IsAbs(filepath.FromSlash(doc.ConfigDir)) {
		return filepath.FromSlash(doc.ConfigDir)
	}
	return ""
}

// savedConfigFiles says which names a saved plan records as configuration files; nil for a plan --json document.
func savedConfigFiles(doc *jsonplan.Document) func(string) bool {
	if doc.Saved == nil {
		return nil
	}
	names := map[string]bool{}
	for _, f := range doc.Saved.Files {
		if f.Kind == planner.FileConfig {
			names[f.Name] = true
		}
	}
	return func(name string) bool { return names[name] }
}

// relConfigDir is dir (the loaded configuration's directory) relative to the working directory, with forward
// slashes, for a plan document's config_dir; "" when it is outside the working directory.
func relConfigDir(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	wd, err := os.Getwd()
	if err != nil {
		return ""
	}
	rel, err := filepath.Rel(wd, abs)
	if err != nil || rel == ".." || len(rel) > 2 && rel[:3] == ".."+string(filepath.Separator) {
		return ""
	}
	return filepath.ToSlash(rel)
}
