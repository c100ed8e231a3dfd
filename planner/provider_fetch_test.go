package planner

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kewplan/kewplan/config"
)

// TestProviderFetchPlanned: a brokered node has its own and the sandbox's provider_fetch that its runner's API
// offers; a node entry its API lacks is one error however many instances the node has, and refuses each; a
// forwarded node has every feature.
func TestProviderFetchPlanned(t *testing.T) {
	dir := t.TempDir()
	src := `
sandbox {
  memory = "4g"
  images = {
    claude-code = "kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4"
    hermes      = "kew-hermes@sha256:2d9f7e0a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6"
  }
  egress {
    provider_fetch = ["mcp_servers"]
  }
}
node "fix" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "p"
  egress {
    provider_fetch = ["web_search", "mcp_servers"]
  }
}
node "fwd" {
  runner      = "claude-code"
  credentials = "forward"
  model       = "claude-sonnet-4-5"
  repo        = "https://github.com/acme/widgets.git"
  prompt      = "p"
}
node "research" {
  for_each = toset(["a", "b"])
  runner   = "hermes"
  model    = "anthropic/claude-sonnet-4.5"
  repo     = "https://github.com/acme/widgets.git"
  prompt   = "p"
  egress {
    provider_fetch = ["code_execution", "web_fetch"]
  }
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := config.Load(dir)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	p, _ := Build(cfg, Inputs{FS: os.DirFS(dir)})
	got := map[string][]string{}
	refused := map[string]bool{}
	for _, np := range p.Nodes {
		got[np.Name], refused[np.Name] = np.ProviderFetch, np.Errors
	}
	want := map[string][]string{
		"fix":           {"mcp_servers", "web_search"},
		"fwd":           config.ProviderFetchFeatures,
		`research["a"]`: {"web_fetch"},
		`research["b"]`: {"web_fetch"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("provider_fetch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]bool{"fix": false, "fwd": false, `research["a"]`: true, `research["b"]`: true}, refused); diff != "" {
		t.Errorf("refused nodes (-want +got):\n%s", diff)
	}
	var unsupported []int
	for _, d := range p.Diagnostics {
		if DiagnosticRuleID(d) == RuleProviderFetchUnsupported && d.Subject != nil {
			unsupported = append(unsupported, d.Subject.Start.Line)
		}
	}
	if diff := cmp.Diff([]int{35}, unsupported); diff != "" {
		t.Errorf("provider-fetch-unsupported at lines (-want +got):\n%s\n%v", diff, p.Diagnostics)
	}
}
