package config

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/hashicorp/hcl/v2"
)

func TestParsePolicyValid(t *testing.T) {
	src := `
policy {
  require_pinned_images  = true
  allowed_networks       = ["allowlist"]
  allowed_image_prefixes = ["ghcr.io/acme/", "registry.acme.test/"]
  credentials = {
    ANTHROPIC_API_KEY  = ["claude-code"]   # which runners may receive each credential
    OPENROUTER_API_KEY = ["opencode", "pi"]
    "GITHUB_TOKEN"     = []
  }
  max_pids_limit = 1024
  required_runtime = "runsc"
}
`
	p, diags := ParsePolicy([]byte(src), "policy.hcl")
	if diags.HasErrors() {
		t.Fatalf("ParsePolicy() diagnostics: %v", diags)
	}
	want := &Policy{
		RequirePinnedImages:  true,
		AllowedNetworks:      []string{"allowlist"},
		AllowedImagePrefixes: []string{"ghcr.io/acme/", "registry.acme.test/"},
		Credentials: map[string][]string{
			"ANTHROPIC_API_KEY":  {"claude-code"},
			"OPENROUTER_API_KEY": {"opencode", "pi"},
			"GITHUB_TOKEN":       {},
		},
		MaxPidsLimit:    1024,
		RequiredRuntime: "runsc",
	}
	if diff := cmp.Diff(want, p, cmpopts.IgnoreTypes(hcl.Range{})); diff != "" {
		t.Errorf("ParsePolicy() mismatch (-want +got):\n%s", diff)
	}
	if got := p.MaxPidsLimitRange.Start.Line; got != 11 {
		t.Errorf("MaxPidsLimitRange starts on line %d, want 11", got)
	}
	if got := p.DeclRange.Start.Line; got != 2 {
		t.Errorf("DeclRange starts on line %d, want 2", got)
	}
}

func TestParsePolicyEmptyBlock(t *testing.T) {
	p, diags := ParsePolicy([]byte("policy {}\n"), "p.hcl")
	if diags.HasErrors() {
		t.Fatalf("ParsePolicy() diagnostics: %v", diags)
	}
	if diff := cmp.Diff(&Policy{}, p, cmpopts.IgnoreTypes(hcl.Range{})); diff != "" {
		t.Errorf("ParsePolicy() mismatch (-want +got):\n%s", diff)
	}
}

// expectedErrors reads Terraform-style inline expectations: a line ending in `# ERROR: <summary>` must draw a
// diagnostic with that summary whose subject starts on that line.
func expectedErrors(src string) []string {
	re := regexp.MustCompile(`#\s*ERROR:\s*(.+)$`)
	var out []string
	for i, line := range strings.Split(src, "\n") {
		if m := re.FindStringSubmatch(line); m != nil {
			out = append(out, fmt.Sprintf("%d: %s", i+1, strings.TrimSpace(m[1])))
		}
	}
	sort.Strings(out)
	return out
}

func gotErrors(diags hcl.Diagnostics) []string {
	var out []string
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		line := 0
		if d.Subject != nil {
			line = d.Subject.Start.Line
		}
		out = append(out, fmt.Sprintf("%d: %s", line, d.Summary))
	}
	sort.Strings(out)
	return out
}

func TestParsePolicyErrors(t *testing.T) {
	tests := map[string]string{
		"wrong types": `
policy {
  require_pinned_images  = "yes"            # ERROR: Invalid policy value
  allowed_networks       = "allowlist"      # ERROR: Invalid policy value
  max_pids_limit         = "1024"           # ERROR: Invalid policy value
  allowed_image_prefixes = [1]              # ERROR: Invalid policy value
}
`,
		"bad values": `
policy {
  allowed_networks       = ["allowlist", "host"]   # ERROR: Invalid network in policy
  allowed_image_prefixes = [""]                    # ERROR: Invalid image prefix in policy
  max_pids_limit         = 0                       # ERROR: Invalid max_pids_limit
}
`,
		"required runtime": `
policy {
  required_runtime = "/usr/bin/runsc" # ERROR: Invalid required_runtime
}
`,
		"required runtime type": `
policy {
  required_runtime = ["runsc"] # ERROR: Invalid policy value
}
`,
		"required runtime empty": `
policy {
  required_runtime = "" # ERROR: Invalid required_runtime
}
`,
		"egress patterns": `
policy {
  allowed_egress = [
    "github.com",
    "10.0.0.0/8", # ERROR: Invalid egress pattern in policy
    "https://x.example", # ERROR: Invalid egress pattern in policy
  ]
}
`,
		"fractional pids": `
policy {
  max_pids_limit = 10.5 # ERROR: Invalid max_pids_limit
}
`,
		"empty lists": `
policy {
  allowed_networks       = [] # ERROR: Empty list in policy
  allowed_image_prefixes = [] # ERROR: Empty list in policy
}
`,
		"duplicates": `
policy {
  allowed_networks = ["allowlist", "allowlist"] # ERROR: Duplicate value in policy
  credentials = {
    A_KEY = ["pi", "pi"] # ERROR: Duplicate value in policy
  }
}
`,
		"credentials": `
policy {
  credentials = {
    "A_KEY=secret" = ["pi"]        # ERROR: Invalid credential name in policy
    B_KEY          = ["not a name"] # ERROR: Invalid runner name in policy
    C_KEY          = "pi"           # ERROR: Invalid policy value
  }
}
`,
		"credentials not an object": `
policy {
  credentials = ["A_KEY"] # ERROR: Invalid policy value
}
`,
		"variables": `
policy {
  max_pids_limit   = var.limit        # ERROR: Policy values must be literals
  allowed_networks = [local.net]      # ERROR: Policy values must be literals
  allowed_image_prefixes = [lower("X")] # ERROR: Policy values must be literals
}
`,
		"null": `
policy {
  require_pinned_images = null # ERROR: Invalid policy value
}
`,
		"unknown attribute": `
policy {
  require_pinned_image = true # ERROR: Unsupported argument
}
`,
		"label": `
policy "org" { # ERROR: Extraneous label for policy
}
`,
		"duplicate block": `
policy {
}
policy { # ERROR: Duplicate policy block
}
`,
		"other blocks": `
node "x" { # ERROR: Unsupported block type
}
policy {
}
`,
		"no policy": `# ERROR: No policy block
`,
	}
	for name, src := range tests {
		t.Run(name, func(t *testing.T) {
			_, diags := ParsePolicy([]byte(src), "policy.hcl")
			if diff := cmp.Diff(expectedErrors(src), gotErrors(diags)); diff != "" {
				t.Errorf("ParsePolicy() errors mismatch (-want +got):\n%s", diff)
			}
			for _, d := range diags {
				if d.Detail == "" || strings.HasSuffix(d.Summary, ".") {
					t.Errorf("diagnostic %q: want a Detail and a Summary without a full stop", d.Summary)
				}
			}
		})
	}
}

func TestLoadPolicyFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "policy.hcl")
	if err := os.WriteFile(good, []byte("policy {\n  max_pids_limit = 64\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, files, diags := LoadPolicyFile(good)
	if diags.HasErrors() {
		t.Fatalf("LoadPolicyFile() diagnostics: %v", diags)
	}
	if p.MaxPidsLimit != 64 {
		t.Errorf("MaxPidsLimit = %d, want 64", p.MaxPidsLimit)
	}
	if _, ok := files[good]; !ok {
		t.Errorf("files = %v, want the source under %s", files, good)
	}

	binary := filepath.Join(dir, "binary.hcl")
	if err := os.WriteFile(binary, []byte{0xff, 0xfe, 'p'}, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.hcl")
	if err := os.WriteFile(big, make([]byte, MaxPolicyFileBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	for path, summary := range map[string]string{
		filepath.Join(dir, "missing.hcl"): "Policy file not found",
		dir:                               "Policy file is a directory",
		binary:                            "Policy file is not UTF-8",
		big:                               "Policy file too large",
	} {
		_, _, diags := LoadPolicyFile(path)
		if len(diags) != 1 || diags[0].Summary != summary {
			t.Errorf("LoadPolicyFile(%s) = %v, want one %q diagnostic", path, diags, summary)
		}
	}
}

func FuzzParsePolicy(f *testing.F) {
	f.Add([]byte("policy {\n  max_pids_limit = 1024\n  credentials = { A = [\"pi\"] }\n}\n"))
	f.Add([]byte("policy { allowed_networks = [\"open\"] }"))
	f.Add([]byte("policy {\n credentials = { (\"x\") = [1] }\n}"))
	for _, s := range hostileHCLSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		limitStack()
		p, diags := ParsePolicy(src, "fuzz.hcl") // must never panic
		if p == nil && !diags.HasErrors() {
			t.Fatal("no policy and no error")
		}
	})
}
