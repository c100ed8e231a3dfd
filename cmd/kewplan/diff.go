package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/internal/safefile"
	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/plandiff"
	"github.com/kewplan/kewplan/planfile"
	"github.com/kewplan/kewplan/policyrules"
	"github.com/kewplan/kewplan/views"
)

// DiffCmd is `kewplan diff BASE HEAD [--format human|json|markdown|sarif]`.
type DiffCmd struct {
	Base   string `arg:"" name:"base" help:"The plan before the change: a saved plan (kewplan plan --out) or kewplan plan --json output; - reads standard input."`
	Head   string `arg:"" name:"head" help:"The plan after the change, in the same forms as BASE."`
	Format string `name:"format" default:"human" placeholder:"FORMAT" help:"Output format: human, json, markdown (a pull-request comment) or sarif (GitHub code scanning)."`
	Policy string `name:"policy" placeholder:"FILE" help:"Judge HEAD and the change with the rules of the policy block in FILE: exit 1 when a deny rule matches, 2 when a review rule does."`
}

// Help shows an example and the exit statuses.
func (DiffCmd) Help() string {
	return "Example:\n" +
		"  kewplan plan --json > head.json\n" +
		"  kewplan diff base.json head.json --format markdown > comment.md\n\n" +
		"Exit status 0 when nothing widens credential exposure, 2 when something does and only then (a credential reaches a node\n" +
		"it did not reach, a node gains open egress, a hardening flag is lost or weakened, an image leaves its\n" +
		"pinned digest: review required), and 1 on any error, usage errors included. Narrowing is shown but does not fail.\n" +
		"With --policy, a deny rule that matches exits 1 and a review rule 2."
}

// Run compares the plans, renders the diff and sets the exit status.
func (c *DiffCmd) Run(env *Env) error {
	// Findings are located in HEAD's ranges, named relative to HEAD's configuration directory.
	paths := &sarifPaths{}
	view, err := views.NewDiff(c.Format, env.streams(), views.DiffOptions{
		KewplanVersion: version,
		Source:         paths.source,
		URI:            paths.uri,
	})
	if err != nil {
		return err
	}
	if c.Base == "-" && c.Head == "-" {
		return errors.New("only one of BASE and HEAD can be read from standard input (-)")
	}
	base, err := readPlanArg(env, c.Base, "BASE")
	if err != nil {
		return err
	}
	head, err := readPlanArg(env, c.Head, "HEAD")
	if err != nil {
		return err
	}
	paths.dir, paths.isConfig = docConfigDir(head, c.Head), savedConfigFiles(head)
	d := plandiff.Compare(c.Base, base, c.Head, head)
	var res *policyrules.Result
	if c.Policy != "" {
		pol, files, diags := config.LoadPolicyFile(c.Policy)
		if diags.HasErrors() {
			views.NewView(env.streams()).Diagnostics(diags, files)
			return ExitCode(1)
		}
		isConfig := paths.isConfig
		paths.isConfig = func(name string) bool { return name != c.Policy && (isConfig == nil || isConfig(name)) }
		res = policyrules.Evaluate(policyrules.Rules(pol), policyrules.Input{Plan: head, Change: d})
		d.PolicyJudged = true
		d.PolicyFindings = jsonplan.NewDiagnostics(res.Diagnostics(), files)
	}
	if err := view.Diff(d); err != nil {
		return fmt.Errorf("write diff: %w", err)
	}
	switch {
	case res != nil && res.Denied():
		return ExitCode(1)
	case d.Widened(), res != nil && res.NeedsReview():
		return ExitCode(exitWidened)
	}
	return nil
}

// readPlanArg reads and decodes one plan argument; role ("BASE" or "HEAD") makes errors say which one failed.
func readPlanArg(env *Env, name, role string) (*jsonplan.Document, error) {
	var data []byte
	var err error
	if name == "-" {
		data, err = io.ReadAll(io.LimitReader(env.Stdin, plandiff.MaxPlanBytes+1))
	} else {
		data, err = readPlanFile(name)
	}
	if err == nil {
		data, err = planfile.Decompress(data, planfile.MaxBytes) // a saved plan is gzip-compressed
		if errors.Is(err, planfile.ErrInflated) {
			err = fmt.Errorf("%s: %w", name, err)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s plan: %w", role, err)
	}
	doc, err := plandiff.DecodePlan(data, name)
	if err != nil {
		return nil, fmt.Errorf("%s plan %w", role, err)
	}
	return doc, nil
}

// readPlanFile reads a plan argument: a regular file (a FIFO or a device is refused at once, never waited on)
// within plandiff.MaxPlanBytes.
func readPlanFile(name string) ([]byte, error) {
	b, err := safefile.Read(name, plandiff.MaxPlanBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%s does not exist: give a file written by kewplan plan --out or kewplan plan --json", name)
	case errors.Is(err, safefile.ErrNotRegular):
		if info, serr := os.Stat(name); serr == nil && info.IsDir() {
			return nil, fmt.Errorf("%s is a directory: give a plan file written by kewplan plan --out or kewplan plan --json", name)
		}
		return nil, err
	case errors.Is(err, safefile.ErrTooLarge):
		return nil, fmt.Errorf("%s: %w", name, plandiff.ErrTooLarge)
	}
	return b, err
}

// maxSourceBytes bounds a configuration file read for SARIF fingerprints.
const maxSourceBytes = 4 << 20

// readRelativeSource serves SARIF fingerprints the configuration files named in HEAD's ranges. Those names come
// from a plan file, so only relative names inside the working directory are read, and only regular files.
func readRelativeSource(name string) ([]byte, bool) {
	clean := filepath.Clean(filepath.FromSlash(name))
	if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return nil, false
	}
	src, err := safefile.ReadWith(clean, maxSourceBytes, safefile.Options{NoFollow: true})
	if err != nil {
		return nil, false
	}
	return src, true
}

// sarifURI writes a range's file name as SARIF wants it: relative to the working directory (the repository root
// in CI), with forward slashes. An absolute name outside the working directory stays absolute, as a file URI.
func sarifURI(name string) string {
	if filepath.IsAbs(name) {
		if wd, err := os.Getwd(); err == nil {
			if rel, err := filepath.Rel(wd, name); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				return views.SARIFRelativeURI(rel)
			}
		}
		return "file://" + views.SARIFRelativeURI(name)
	}
	return views.SARIFRelativeURI(name)
}
