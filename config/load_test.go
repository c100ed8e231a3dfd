package config

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// expectRE finds the expected diagnostics written inline in a fixture, Terraform internal/configs style:
// `# ERROR: <summary>` or `# WARNING: <summary>` on the line where the diagnostic's range starts.
var expectRE = regexp.MustCompile(`# (ERROR|WARNING): ([^#\n]*[^#\s])`)

// fixtureDiag is a diagnostic reduced to what fixtures assert.
type fixtureDiag struct {
	File     string
	Line     int
	Severity string
	Summary  string
}

func (d fixtureDiag) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", d.File, d.Line, d.Severity, d.Summary)
}

func expectedDiags(t *testing.T, files []string) []fixtureDiag {
	t.Helper()
	var want []fixtureDiag
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(src))
		for line := 1; sc.Scan(); line++ {
			for _, m := range expectRE.FindAllSubmatch(sc.Bytes(), -1) {
				want = append(want, fixtureDiag{File: filepath.Base(f), Line: line, Severity: string(m[1]), Summary: string(m[2])})
			}
		}
	}
	sortFixtureDiags(want)
	return want
}

func sortFixtureDiags(ds []fixtureDiag) {
	sort.Slice(ds, func(i, j int) bool { return ds[i].String() < ds[j].String() })
}

// fullCheck runs what `kewplan validate` runs in this package: Load, variables with no inputs, and one
// evaluation of every node and runner.
func fullCheck(path string) (*Config, hcl.Diagnostics) {
	cfg, diags := Load(path)
	if diags.HasErrors() {
		return cfg, diags
	}
	vals, d := cfg.ResolveVariables(VariableInputs{})
	diags = append(diags, d...)
	if diags.HasErrors() {
		return cfg, diags
	}
	ctx, d := cfg.EvalContext(&Scope{Vars: vals})
	diags = append(diags, d...)
	for _, name := range slices.Sorted(maps.Keys(cfg.Nodes)) {
		_, d := EvalNode(cfg.Nodes[name], ctx)
		diags = append(diags, d...)
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Runners)) {
		_, d := EvalRunnerArgs(cfg.Runners[name], ctx, "m")
		diags = append(diags, d...)
	}
	return cfg, diags
}

func gotDiags(t *testing.T, diags hcl.Diagnostics) []fixtureDiag {
	t.Helper()
	var got []fixtureDiag
	for _, d := range diags {
		sev := "ERROR"
		if d.Severity == hcl.DiagWarning {
			sev = "WARNING"
		}
		if d.Subject == nil {
			t.Errorf("diagnostic without a range: %s: %s", d.Summary, d.Detail)
			continue
		}
		checkWording(t, d)
		got = append(got, fixtureDiag{File: filepath.Base(d.Subject.Filename), Line: d.Subject.Start.Line, Severity: sev, Summary: d.Summary})
	}
	sortFixtureDiags(got)
	return got
}

// checkWording holds diagnostics to the house style: a short summary without a full stop, and a detail of
// whole sentences.
func checkWording(t *testing.T, d *hcl.Diagnostic) {
	t.Helper()
	if strings.HasSuffix(d.Summary, ".") {
		t.Errorf("summary %q ends with a full stop", d.Summary)
	}
	if d.Detail == "" || !strings.ContainsAny(d.Detail[len(d.Detail)-1:], ".?") {
		t.Errorf("%s: detail %q is not whole sentences", d.Summary, d.Detail)
	}
}

func TestErrorFiles(t *testing.T) {
	files, err := filepath.Glob("testdata/error-files/*.hcl")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			_, diags := fullCheck(f)
			want := expectedDiags(t, []string{f})
			if len(want) == 0 {
				t.Fatal("the fixture expects no diagnostic; add # ERROR: comments")
			}
			if diff := cmp.Diff(want, gotDiags(t, diags)); diff != "" {
				t.Errorf("diagnostics mismatch (-want +got):\n%s\nall diagnostics:\n%s", diff, diags)
			}
		})
	}
}

func TestErrorDirs(t *testing.T) {
	dirs, err := filepath.Glob("testdata/error-dirs/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			files, _ := filepath.Glob(filepath.Join(dir, "*.hcl"))
			_, diags := fullCheck(dir)
			if diff := cmp.Diff(expectedDiags(t, files), gotDiags(t, diags)); diff != "" {
				t.Errorf("diagnostics mismatch (-want +got):\n%s\nall diagnostics:\n%s", diff, diags)
			}
		})
	}
}

func TestValidFiles(t *testing.T) {
	files, _ := filepath.Glob("testdata/valid-files/*.hcl")
	examples, _ := filepath.Glob("../examples/*.hcl")
	files = append(files, examples...)
	if len(examples) < 3 {
		t.Fatalf("found %d examples, want at least 3", len(examples))
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			_, diags := fullCheck(f)
			for _, d := range diags {
				t.Errorf("unexpected diagnostic: %s", d)
			}
		})
	}
}

// TestLoadPathErrors covers what is wrong with PATH itself: such diagnostics have no range.
func TestLoadPathErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	onlySub := filepath.Join(dir, "only-sub")
	for _, d := range []string{empty, filepath.Join(onlySub, "nested")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(onlySub, "nested", "a.hcl"), []byte("sandbox {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(empty, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	txt := filepath.Join(empty, "notes.txt")
	tests := []struct {
		path, summary string
	}{
		{filepath.Join(dir, "missing"), "Configuration not found"},
		{filepath.Join(dir, "missing.hcl"), "Configuration not found"},
		{empty, "No configuration files"},
		{onlySub, "No configuration files"},
		{txt, "Not a configuration file"},
	}
	for _, tc := range tests {
		t.Run(filepath.Base(tc.path), func(t *testing.T) {
			cfg, diags := Load(tc.path)
			if cfg == nil {
				t.Fatal("Load returned a nil Config")
			}
			var got []string
			for _, d := range diags {
				if d.Subject != nil {
					t.Errorf("path diagnostic %q has a range", d.Summary)
				}
				if !strings.Contains(d.Detail, tc.path) {
					t.Errorf("detail %q does not name the path", d.Detail)
				}
				got = append(got, d.Summary)
			}
			if diff := cmp.Diff([]string{tc.summary}, got); diff != "" {
				t.Errorf("Load(%s) mismatch (-want +got):\n%s", tc.path, diff)
			}
		})
	}
}

// TestLoadFileNames checks that ranges and Files use the path as the user gave it.
func TestLoadFileNames(t *testing.T) {
	cfg, diags := Load("../examples/quickstart.hcl")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if diff := cmp.Diff([]string{"quickstart.hcl"}, slices.Sorted(maps.Keys(cfg.Files))); diff != "" {
		t.Errorf("Files mismatch (-want +got):\n%s", diff)
	}
	if cfg.Dir != "../examples" {
		t.Errorf("Dir = %q, want ../examples", cfg.Dir)
	}
	dir := t.TempDir()
	for name, src := range map[string]string{
		"b.hcl":       "node \"b\" {\n  runner = \"claude-code\"\n  repo = \"r\"\n  prompt = \"p\"\n}\n",
		"a.hcl":       "sandbox {}\n",
		".hidden.hcl": "this is not parsed",
		"c.txt":       "neither is this",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, diags = Load(dir)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	want := []string{"a.hcl", "b.hcl"}
	if diff := cmp.Diff(want, slices.Sorted(maps.Keys(cfg.Files))); diff != "" {
		t.Errorf("Files mismatch (-want +got):\n%s", diff)
	}
	if got := cfg.Nodes["b"].DeclRange.Filename; got != want[1] {
		t.Errorf("node range file = %q, want %q", got, want[1])
	}
}

func TestLoadModel(t *testing.T) {
	cfg, diags := Load("../examples/review-pipeline.hcl")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	sb := cfg.Sandbox
	gotSandbox := []any{sb.Network, sb.AllowlistNetwork, sb.PidsLimit, sb.Memory, sb.CPUs, slices.Sorted(maps.Keys(sb.Images))}
	wantSandbox := []any{NetworkAllowlist, DefaultAllowlistNetwork, int64(512), "4g", "2", []string{"claude-code", "opencode"}}
	if diff := cmp.Diff(wantSandbox, gotSandbox); diff != "" {
		t.Errorf("sandbox mismatch (-want +got):\n%s", diff)
	}
	var allow []string
	for _, p := range sb.Egress.Allow {
		allow = append(allow, p.String())
	}
	if diff := cmp.Diff([]string{"github.com"}, allow); diff != "" {
		t.Errorf("sandbox egress mismatch (-want +got):\n%s", diff)
	}
	if fix := cfg.Nodes["fix"]; fix.Egress == nil || len(fix.Egress.Allow) != 1 || fix.Egress.Allow[0].String() != "pypi.org" {
		t.Errorf("node fix egress = %+v, want pypi.org", fix.Egress)
	}
	review := cfg.Nodes["review"]
	var deps []string
	for _, d := range review.DependsOn {
		deps = append(deps, fmt.Sprintf("%s@%d explicit=%v", d.Name, d.Range.Start.Line, d.Explicit))
	}
	if diff := cmp.Diff([]string{"fix@54 explicit=true"}, deps); diff != "" {
		t.Errorf("review.DependsOn mismatch (-want +got):\n%s", diff)
	}
	if cfg.Nodes["fix"].DependsOn != nil {
		t.Errorf("fix.DependsOn = %v, want none", cfg.Nodes["fix"].DependsOn)
	}
	v := cfg.Variables["model"]
	if v.Type != cty.String || v.Default != cty.StringVal("claude-sonnet-4-5") || len(v.Validations) != 1 {
		t.Errorf("variable model = %#v", v)
	}
}

func TestDefaultSandbox(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "a.hcl")
	if err := os.WriteFile(f, []byte("node \"a\" {\n  runner = \"pi\"\n  repo = \"r\"\n  prompt = \"p\"\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := Load(f)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	want := &Sandbox{Network: NetworkAllowlist, AllowlistNetwork: "kew-allowlist", PidsLimit: 512,
		TmpfsSize: "512m", Credentials: CredentialsBrokered, Egress: SandboxEgress{ProxyNetwork: "bridge"},
		Images: map[string]string{}, ImageRanges: map[string]hcl.Range{}}
	if diff := cmp.Diff(want, cfg.Sandbox); diff != "" {
		t.Errorf("default sandbox mismatch (-want +got):\n%s", diff)
	}
	if cfg.Policy != nil {
		t.Errorf("Policy = %v, want nil without a policy block", cfg.Policy)
	}
}

// TestCredentialsModeAndBaseURL: the brokered-credentials settings decode, and each bad value is a diagnostic at
// its range saying how to fix it.
func TestCredentialsModeAndBaseURL(t *testing.T) {
	load := func(t *testing.T, src string) (*Config, hcl.Diagnostics) {
		t.Helper()
		f := filepath.Join(t.TempDir(), "main.hcl")
		if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return Load(f)
	}
	cfg, diags := load(t, `
sandbox {
  credentials = "forward"
  egress {
    upstream_ca_file = "ca.pem"
  }
}
runner "acme-agent" {
  protocol    = "claude-code"
  credentials = ["ACME_AGENT_KEY"]
  endpoints   = ["llm.acme.example"]
  base_url    = "ACME_BASE_URL"
}
node "legacy" {
  runner      = "acme-agent"
  repo        = "r"
  prompt      = "p"
  credentials = "brokered"
}
`)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if sb := cfg.Sandbox; sb.Credentials != CredentialsForward || !sb.CredentialsExplicit || sb.Egress.UpstreamCAFile != "ca.pem" {
		t.Errorf("sandbox: credentials %q (explicit %v), upstream CA %q", sb.Credentials, sb.CredentialsExplicit, sb.Egress.UpstreamCAFile)
	}
	if r := cfg.Runners["acme-agent"]; r == nil || r.BaseURL != "ACME_BASE_URL" {
		t.Errorf("runner base_url = %+v", r)
	}
	nv, d := EvalNode(cfg.Nodes["legacy"], nil)
	if d.HasErrors() || nv.Credentials != CredentialsBrokered {
		t.Errorf("node credentials = %q (%v)", nv.Credentials, d)
	}
	for _, tc := range []struct{ src, summary, detail string }{
		{"sandbox {\n  credentials = \"brokerd\"\n}\n", "Invalid credentials mode", `Did you mean "brokered"?`},
		{"runner \"x\" {\n  protocol = \"pi\"\n  base_url = \"https://x\"\n}\n", "Invalid base URL variable", "not an environment variable's name"},
		{"sandbox {\n  egress {\n    upstream_ca_file = \"\"\n  }\n}\n", "Invalid upstream CA file", "PEM file"},
	} {
		_, diags := load(t, tc.src)
		if !diags.HasErrors() || diags[0].Summary != tc.summary || !strings.Contains(diags[0].Detail, tc.detail) || diags[0].Subject == nil || diags[0].Subject.Start.Line < 2 {
			t.Errorf("%q: diagnostics %v, want %q at its line, saying %q", tc.src, diags, tc.summary, tc.detail)
		}
	}
	cfg, _ = load(t, "node \"n\" {\n  runner = \"pi\"\n  repo = \"r\"\n  prompt = \"p\"\n  credentials = \"both\"\n}\n")
	if _, d := EvalNode(cfg.Nodes["n"], nil); !d.HasErrors() || !strings.Contains(d[0].Detail, "not a credentials mode") || d[0].Subject.Start.Line != 5 {
		t.Errorf("node credentials \"both\": %v", d)
	}
}
