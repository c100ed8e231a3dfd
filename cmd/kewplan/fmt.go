package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/internal/safefile"
	"github.com/kewplan/kewplan/views"
)

// Exit statuses of `kewplan fmt` (see exitTable).
const (
	fmtExitSyntax      = exitError       // a file has syntax errors and was left as it is
	fmtExitUnformatted = exitUnformatted // --check found files to reformat
)

// FmtCmd is `kewplan fmt [PATH...] [--check] [--diff]`.
type FmtCmd struct {
	Paths []string `arg:"" optional:"" help:"Files or directories to format (directories: their *.hcl files, not recursive). Default: the current directory. - reads standard input and writes standard output."`
	Check bool     `help:"Do not write: list the files that are not formatted and exit 3 if there are any."`
	Diff  bool     `help:"Print a unified diff of the changes."`
}

// Help shows an example.
func (FmtCmd) Help() string {
	return "Example:\n  kewplan fmt --check --diff examples/\n\n" +
		"Rewrites files in place and lists the ones it changed. Exit status 0 when done, 3 when --check found\n" +
		"unformatted files, 1 when a file has syntax errors (such a file is never rewritten) or another error."
}

// Run formats every file; one file's problem does not stop the others.
func (c *FmtCmd) Run(env *Env) error {
	paths := c.Paths
	if len(paths) == 0 {
		paths = []string{"."}
	}
	var files []string
	for _, p := range paths {
		if p == "-" {
			files = append(files, p)
			continue
		}
		found, err := fmtFiles(p)
		if err != nil {
			return err
		}
		files = append(files, found...)
	}
	view := views.NewFmt(env.streams())
	syntaxErrors, unformatted := false, false
	for _, name := range files {
		changed, src, diags, err := c.formatFile(env, view, name)
		if err != nil {
			return err
		}
		if diags.HasErrors() {
			syntaxErrors = true
			view.Diagnostics(diags, map[string][]byte{displayName(name): src})
			continue
		}
		unformatted = unformatted || changed
	}
	switch {
	case syntaxErrors:
		return ExitCode(fmtExitSyntax)
	case c.Check && unformatted:
		return ExitCode(fmtExitUnformatted)
	}
	return nil
}

func displayName(name string) string {
	if name == "-" {
		return "<stdin>"
	}
	return name
}

// fmtFiles lists the files a path argument stands for.
func fmtFiles(p string) ([]string, error) {
	info, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s does not exist; give a .hcl file or a directory holding .hcl files", p)
		}
		return nil, err
	}
	if !info.IsDir() {
		if !strings.HasSuffix(p, config.FileExtension) {
			return nil, fmt.Errorf("%s is not a .hcl file; kewplan fmt formats only configuration and variable files", p)
		}
		return []string{p}, nil
	}
	entries, err := os.ReadDir(p)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), config.FileExtension) && !strings.HasPrefix(e.Name(), ".") {
			out = append(out, filepath.Join(p, e.Name()))
		}
	}
	return out, nil
}

// formatFile formats one file (or standard input for "-"). It reports whether the file was not formatted, and
// returns its source for the snippets of syntax errors.
func (c *FmtCmd) formatFile(env *Env, view views.Fmt, name string) (bool, []byte, hcl.Diagnostics, error) {
	var src []byte
	var err error
	var mode fs.FileMode
	if name == "-" {
		src, err = io.ReadAll(io.LimitReader(env.Stdin, fmtMaxFileBytes+1))
		name = displayName(name)
		if err == nil && len(src) > fmtMaxFileBytes {
			err = fmt.Errorf("over the limit of %d MiB", fmtMaxFileBytes>>20)
		}
	} else {
		// A regular file only (a FIFO is refused, not waited on), within the configuration file limit; its
		// mode comes from the same open, so the file written back is the file read.
		var f *os.File
		if f, err = safefile.Open(name, fmtMaxFileBytes); err == nil {
			var info fs.FileInfo
			if info, err = f.Stat(); err == nil {
				mode = info.Mode().Perm()
				src, err = io.ReadAll(io.LimitReader(f, fmtMaxFileBytes+1))
			}
			f.Close()
		}
	}
	if err != nil {
		return false, nil, nil, fmt.Errorf("read %s: %w", name, err)
	}
	if diags := checkFmtSyntax(name, src); diags.HasErrors() {
		return false, src, diags, nil
	}
	out := hclwrite.Format(src)
	if name == "<stdin>" {
		if c.Diff && !bytes.Equal(src, out) {
			view.FileDiff(name, src, out)
			return true, src, nil, nil
		}
		if !c.Check {
			view.Formatted(out)
		}
		return !bytes.Equal(src, out), src, nil, nil
	}
	if bytes.Equal(src, out) {
		return false, src, nil, nil
	}
	view.Changed(name)
	if c.Diff {
		view.FileDiff(name, src, out)
	}
	if !c.Check {
		// Written in place, keeping the file's mode and following a symbolic link to the real file.
		if err := os.WriteFile(name, out, mode); err != nil {
			return true, src, nil, fmt.Errorf("write %s: %w", name, err)
		}
	}
	return true, src, nil, nil
}

// checkFmtSyntax refuses what hclwrite would mangle: invalid UTF-8 and syntax errors.
func checkFmtSyntax(name string, src []byte) hcl.Diagnostics {
	if !utf8.Valid(src) {
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Invalid UTF-8 encoding",
			Detail:   fmt.Sprintf("%s is not UTF-8 text, so it was not formatted. Re-save it as UTF-8.", name),
		}}
	}
	// hclwrite and hclsyntax recurse without a limit: bound nesting first (deep nesting overflowed the stack).
	if d := config.CheckNesting(name, src); d != nil {
		return hcl.Diagnostics{d}
	}
	_, diags := hclsyntax.ParseConfig(src, name, hcl.InitialPos)
	return diags
}

// fmtMaxFileBytes bounds a file fmt reads, as config.Load bounds a configuration file.
const fmtMaxFileBytes = 8 << 20
