//go:build unix

package config

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// withBackstop runs fn in a goroutine so that a regression (a blocking read of a FIFO) fails the test instead of
// hanging the test binary. The timeout is a backstop, not a measurement: a correct run returns at once.
func withBackstop(t *testing.T, fn func() hcl.Diagnostics) hcl.Diagnostics {
	t.Helper()
	done := make(chan hcl.Diagnostics, 1)
	go func() { done <- fn() }()
	select {
	case d := <-done:
		return d
	case <-time.After(60 * time.Second):
		t.Fatal("blocked: a FIFO was opened for reading without O_NONBLOCK")
		return nil
	}
}

const fifoNode = `node "fix" {
  runner = "claude-code"
  repo   = "https://example.com/r.git"
  prompt = file("pipe.md")
}
`

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
}

func wantError(t *testing.T, diags hcl.Diagnostics, parts ...string) {
	t.Helper()
	if !diags.HasErrors() {
		t.Fatalf("no error; want one containing %q", parts)
	}
	text := diags.Error()
	for _, d := range diags {
		text += "\n" + d.Detail
	}
	for _, p := range parts {
		if !strings.Contains(text, p) {
			t.Errorf("diagnostics do not contain %q:\n%s", p, text)
		}
	}
}

// TestFIFOsAreRefused: every file the configuration reads is checked without blocking.
func TestFIFOsAreRefused(t *testing.T) {
	t.Run("configuration file in a directory", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, dir, "main.hcl", "sandbox {}\n")
		mkfifo(t, filepath.Join(dir, "pipe.hcl"))
		diags := withBackstop(t, func() hcl.Diagnostics { _, d := Load(dir); return d })
		wantError(t, diags, "Cannot read configuration file", "pipe.hcl", "named pipe (FIFO)")
	})
	t.Run("configuration file given", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "pipe.hcl")
		mkfifo(t, p)
		diags := withBackstop(t, func() hcl.Diagnostics { _, d := Load(p); return d })
		wantError(t, diags, "named pipe (FIFO)")
	})
	t.Run("file()", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, dir, "main.hcl", fifoNode)
		mkfifo(t, filepath.Join(dir, "pipe.md"))
		diags := withBackstop(t, func() hcl.Diagnostics { _, d := fullCheck(dir); return d })
		wantError(t, diags, "pipe.md is a named pipe (FIFO)")
	})
	t.Run("templatefile()", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, dir, "main.hcl", strings.Replace(fifoNode, `file("pipe.md")`, `templatefile("pipe.md", {})`, 1))
		mkfifo(t, filepath.Join(dir, "pipe.md"))
		diags := withBackstop(t, func() hcl.Diagnostics { _, d := fullCheck(dir); return d })
		wantError(t, diags, "pipe.md is a named pipe (FIFO)")
	})
	t.Run("var file", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, dir, "main.hcl", "variable \"x\" {\n  default = \"a\"\n}\n")
		vf := filepath.Join(dir, "vars.pipe")
		mkfifo(t, vf)
		diags := withBackstop(t, func() hcl.Diagnostics {
			cfg, d := Load(filepath.Join(dir, "main.hcl"))
			if d.HasErrors() {
				return d
			}
			_, d = cfg.ResolveVariables(VariableInputs{VarFiles: []string{vf}})
			return d
		})
		wantError(t, diags, "Cannot read variable file", "named pipe (FIFO)")
	})
	t.Run("policy file", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "policy.hcl")
		mkfifo(t, p)
		diags := withBackstop(t, func() hcl.Diagnostics { _, _, d := LoadPolicyFile(p); return d })
		wantError(t, diags, "Cannot read policy file", "named pipe (FIFO)")
	})
	t.Run("character device as a var file", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, dir, "main.hcl", "sandbox {}\n")
		diags := withBackstop(t, func() hcl.Diagnostics {
			cfg, _ := Load(dir)
			_, d := cfg.ResolveVariables(VariableInputs{VarFiles: []string{"/dev/zero"}})
			return d
		})
		wantError(t, diags, "character device")
	})
}

// TestSymlinkedConfiguration: a configuration file reached through a link reads file() beside the file the link
// leads to, and an error names that resolved path.
func TestSymlinkedConfiguration(t *testing.T) {
	real, elsewhere := t.TempDir(), t.TempDir()
	writeFile(t, real, "main.hcl", strings.Replace(fifoNode, "pipe.md", "prompts/fix.md", 1))
	if err := os.MkdirAll(filepath.Join(real, "prompts"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, real, "prompts/fix.md", "Fix it.")
	link := filepath.Join(elsewhere, "fleet.hcl")
	if err := os.Symlink(filepath.Join(real, "main.hcl"), link); err != nil {
		t.Fatal(err)
	}
	cfg, diags := fullCheck(link)
	if diags.HasErrors() {
		t.Fatalf("a linked configuration does not read file() beside its target: %v", diags)
	}
	if resolved, _ := filepath.EvalSymlinks(real); cfg.Dir != resolved {
		t.Errorf("Dir = %q, want %q", cfg.Dir, resolved)
	}
	if err := os.Remove(filepath.Join(real, "prompts/fix.md")); err != nil {
		t.Fatal(err)
	}
	_, diags = fullCheck(link)
	resolved, _ := filepath.EvalSymlinks(filepath.Join(real, "main.hcl"))
	wantError(t, diags, "no file prompts/fix.md exists", "is a link to "+resolved)
}

// TestDirectoryIsOneConfiguration: `kewplan plan examples/` clashes; the error says why and names the files to
// plan one at a time.
func TestDirectoryIsOneConfiguration(t *testing.T) {
	_, diags := Load("../examples")
	wantError(t, diags, "Duplicate sandbox block", "every *.hcl file of the directory ../examples is read as one configuration",
		"If the files are separate configurations, plan them one at a time, for example kewplan plan ../examples/")
}
