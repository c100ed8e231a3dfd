package views

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/planner"
)

// hostileValue clears the screen, retitles the window and reverses the text after it.
const hostileValue = "m\x1b[2J\x1b]0;PWNED\x07\u202eevil\u2066\u009b"

// rawControl returns the first character of out that a terminal would obey or that reorders text, or "".
func rawControl(out []byte) string {
	for i := 0; i < len(out); {
		r, size := utf8.DecodeRune(out[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			return "invalid UTF-8"
		case r == '\n' || r == '\t':
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) || (r >= 0x202a && r <= 0x202e) ||
			(r >= 0x2066 && r <= 0x2069) || r == 0x200e || r == 0x200f || r == 0x061c:
			return strings.TrimPrefix(string(utf8.AppendRune(nil, r)), "")
		}
		i += size
	}
	return ""
}

func hostilePlan(t *testing.T, src string) (*jsonplan.Document, map[string][]byte) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := config.Load(dir)
	if diags.HasErrors() {
		return jsonplan.NewDocument(&planner.Plan{Diagnostics: diags}, "test", cfg.Files), cfg.Files
	}
	vars, _ := cfg.ResolveVariables(config.VariableInputs{})
	p, _ := planner.Build(cfg, planner.Inputs{Vars: vars, FS: config.DirFS(cfg.Dir)})
	return jsonplan.NewDocument(p, "test", cfg.Files), cfg.Files
}

// TestPlanViewsEscapeControlCharacters: a model, an argv word and a runner carrying terminal control sequences and
// bidi overrides are shown escaped by the human and markdown plans, and exact in JSON.
func TestPlanViewsEscapeControlCharacters(t *testing.T) {
	src := `runner "evil" {
  protocol    = "claude-code"
  credentials = ["ANTHROPIC_API_KEY"]
  args        = ["--append-system-prompt", "` + hostileValue + `"]
}

node "fix" {
  runner = "evil"
  model  = "` + hostileValue + `"
  repo   = "https://example.com/r.git"
  prompt = "p"
}
`
	doc, _ := hostilePlan(t, src)
	for name, render := range map[string]planRenderer{"human": WritePlanHuman, "markdown": WritePlanMarkdown} {
		var buf bytes.Buffer
		if err := render(&buf, doc); err != nil {
			t.Fatal(err)
		}
		if c := rawControl(buf.Bytes()); c != "" {
			t.Errorf("%s plan writes the raw character %q:\n%s", name, c, buf.String())
		}
		if !strings.Contains(buf.String(), `\x1b[2J\x1b]0;PWNED\x07\u202eevil\u2066\u009b`) {
			t.Errorf("%s plan does not show the escaped model:\n%s", name, buf.String())
		}
	}
	var buf bytes.Buffer
	if err := WritePlanJSON(&buf, doc); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `\u001b[2J`) || !strings.Contains(buf.String(), "\u202eevil") {
		t.Errorf("the JSON plan is not exact:\n%s", buf.String())
	}
}

// TestDiagnosticSnippetsEscapeControlCharacters: an error snippet quoting a line with control characters shows
// them escaped, with the carets still under the highlighted span.
func TestDiagnosticSnippetsEscapeControlCharacters(t *testing.T) {
	src := "node \"fix\" {\n  modle = \"\x1b[2J\u202e\"\n}\n"
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := config.Load(dir)
	if !diags.HasErrors() {
		t.Fatal("want an error")
	}
	for _, color := range []bool{false, true} {
		var buf bytes.Buffer
		if err := writeDiagnostics(&buf, diags, color, cfg.Files); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		if color {
			out = strings.NewReplacer(ansiReset, "", ansiBold, "", ansiRed, "", ansiYellow, "", ansiUnderline, "").Replace(out)
		}
		if c := rawControl([]byte(out)); c != "" {
			t.Errorf("diagnostics (color %v) write the raw character %q:\n%s", color, c, out)
		}
		if !strings.Contains(out, `modle = "\x1b[2J\u202e"`) {
			t.Errorf("diagnostics (color %v) do not show the escaped line:\n%s", color, out)
		}
	}
}
