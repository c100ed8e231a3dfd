package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"
)

func TestParseHostPattern(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // the normalised form; "" when refused
		why  string // a word of the refusal's detail
	}{
		{in: "github.com", want: "github.com"},
		{in: "GitHub.COM.", want: "github.com"},
		{in: "github.com:443", want: "github.com"},
		{in: "proxy.golang.org:8443", want: "proxy.golang.org:8443"},
		{in: "*.PythonHosted.org", want: "*.pythonhosted.org"},
		{in: "bücher.example", want: "xn--bcher-kva.example"},
		{in: "stub", want: "stub"},
		{in: "", why: "empty"},
		{in: " github.com", why: "white space"},
		{in: "*", why: "network = \"open\""},
		{in: "*:443", why: "network = \"open\""},
		{in: "https://github.com/acme", why: "Write \"github.com\""},
		{in: "github.com/acme", why: "path"},
		{in: "user@github.com", why: "user information"},
		{in: "10.0.0.0/8", why: "CIDR"},
		{in: "fd00::/8", why: "CIDR"},
		{in: "1.2.3.4", why: "IP address"},
		{in: "1.2.3.4:443", why: "IP address"},
		{in: "127.1", why: "IP address"},
		{in: "2130706433", why: "IP address"},
		{in: "::1", why: "IP address"},
		{in: "[::1]", why: "IP address"},
		{in: "[2001:db8::1]:443", why: "IP address"},
		{in: "github.com:0", why: "port"},
		{in: "github.com:https", why: "port"},
		{in: "github.com:0443", why: "port"},
		{in: "*.com", why: "top-level"},
		{in: "a.*.com", why: "first label"},
		{in: "git*hub.com", why: "first label"},
		{in: "-x.example.com", why: "'-'"},
		{in: "a..b", why: "empty label"},
		{in: "under_score.example.com", why: "letters, digits"},
		{in: strings.Repeat("a", 64) + ".com", why: "63"},
	} {
		got, why := ParseHostPattern(tc.in)
		if tc.want != "" {
			if why != "" || got.String() != tc.want {
				t.Errorf("ParseHostPattern(%q) = %q, %q; want %q", tc.in, got.String(), why, tc.want)
			}
			continue
		}
		if why == "" || !strings.Contains(why, tc.why) {
			t.Errorf("ParseHostPattern(%q) refusal = %q, want one mentioning %q", tc.in, why, tc.why)
		}
	}
}

func TestHostPatternMatchAndCover(t *testing.T) {
	p := func(s string) HostPattern {
		hp, why := ParseHostPattern(s)
		if why != "" {
			t.Fatalf("ParseHostPattern(%q): %s", s, why)
		}
		return hp
	}
	wild := p("*.example.com")
	for host, want := range map[string]bool{"a.example.com": true, "a.b.example.com": true, "example.com": false, "badexample.com": false} {
		if got := wild.MatchHost(host); got != want {
			t.Errorf("%s.MatchHost(%q) = %v, want %v", wild, host, got, want)
		}
	}
	for _, tc := range []struct {
		p, q string
		want bool
	}{
		{"*.example.com", "a.example.com", true},
		{"*.example.com", "*.a.example.com", true},
		{"*.example.com", "*.example.com", true},
		{"*.example.com", "example.com", false},
		{"example.com", "*.example.com", false},
		{"example.com", "example.com:8443", false},
		{"example.com:8443", "example.com:8443", true},
	} {
		if got := p(tc.p).Covers(p(tc.q)); got != tc.want {
			t.Errorf("%s.Covers(%s) = %v, want %v", tc.p, tc.q, got, tc.want)
		}
	}
}

func TestEgressConfigNormalised(t *testing.T) {
	cfg, diags := parseSource(t, `
sandbox {
  tmpfs_size = "1G"
  egress {
    allow = ["GitHub.com", "github.com.", "github.com:443", "*.pythonhosted.org"]
  }
}
runner "claude-code" {
  endpoints = ["llm.corp.example"]
}
node "fix" {
  runner = "claude-code"
  model  = "m"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "p"
  egress { allow = ["pypi.org", "PyPI.org"] }
}
`)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	str := func(ps []HostPattern) []string {
		out := []string{}
		for _, p := range ps {
			out = append(out, p.String())
		}
		return out
	}
	got := map[string]any{
		"sandbox":  str(cfg.Sandbox.Egress.Allow),
		"proxynet": cfg.Sandbox.Egress.ProxyNetwork,
		"tmpfs":    cfg.Sandbox.TmpfsSize,
		"runner":   str(cfg.Runners["claude-code"].Endpoints),
		"node":     str(cfg.Nodes["fix"].Egress.Allow),
	}
	want := map[string]any{
		"sandbox": []string{"*.pythonhosted.org", "github.com"}, "proxynet": "bridge", "tmpfs": "1g",
		"runner": []string{"llm.corp.example"}, "node": []string{"pypi.org"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("egress configuration mismatch (-want +got):\n%s", diff)
	}
}

// TestPrivateHostsDecoded: private_hosts takes allow's entry syntax, normalised; a node's may name a host the
// sandbox allows.
func TestPrivateHostsDecoded(t *testing.T) {
	cfg, diags := parseSource(t, `
sandbox {
  egress {
    allow         = ["Artifactory.Corp", "git.corp:2222"]
    private_hosts = ["artifactory.corp."]
  }
}
node "fix" {
  runner = "claude-code"
  model  = "m"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "p"
  egress {
    private_hosts = ["git.corp:2222"]
  }
}
`)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	str := func(ps []HostPattern) []string {
		out := []string{}
		for _, p := range ps {
			out = append(out, p.String())
		}
		return out
	}
	got := [][]string{str(cfg.Sandbox.Egress.PrivateHosts), str(cfg.Nodes["fix"].Egress.PrivateHosts)}
	want := [][]string{{"artifactory.corp"}, {"git.corp:2222"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("private_hosts mismatch (-want +got):\n%s", diff)
	}
}

// parseSource loads src as the only file of a configuration directory.
func parseSource(t *testing.T, src string) (*Config, hcl.Diagnostics) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return Load(dir)
}

func TestPolicyAllowedEgress(t *testing.T) {
	p, diags := ParsePolicy([]byte(`policy {
  allowed_egress = ["*.GitHub.com", "api.anthropic.com", "pypi.org:443"]
}`), "p.hcl")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	var got []string
	for _, hp := range p.AllowedEgress {
		got = append(got, hp.String())
	}
	if diff := cmp.Diff([]string{"*.github.com", "api.anthropic.com", "pypi.org"}, got); diff != "" {
		t.Errorf("AllowedEgress mismatch (-want +got):\n%s", diff)
	}
}

// TestProviderFetchDecoded: provider_fetch takes features from a closed set, in the sandbox's egress block and a
// node's; a refused entry is reported at its line with the features allowed, and the policy's list may be empty.
func TestProviderFetchDecoded(t *testing.T) {
	cfg, diags := parseSource(t, `
sandbox {
  egress {
    provider_fetch = ["url_sources"]
  }
}
node "fix" {
  runner = "claude-code"
  model  = "m"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "p"
  egress {
    provider_fetch = ["web_search", "mcp_servers"]
  }
}
node "lint" {
  runner = "claude-code"
  model  = "m"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "p"
  egress {
    provider_fetch = []
  }
}
`)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	got := [][]string{cfg.Sandbox.Egress.ProviderFetch, cfg.Nodes["fix"].Egress.ProviderFetch, cfg.Nodes["lint"].Egress.ProviderFetch}
	want := [][]string{{"url_sources"}, {"web_search", "mcp_servers"}, {}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("provider_fetch mismatch (-want +got):\n%s", diff)
	}
	if r := cfg.Nodes["fix"].Egress.ProviderFetchRanges; len(r) != 2 || r[1].Start.Line != 13 || r[1].Start.Column != 37 {
		t.Errorf("ranges %v, want two entries, the second at line 13, column 37", r)
	}

	_, diags = parseSource(t, `
node "fix" {
  runner = "claude-code"
  model  = "m"
  repo   = "https://github.com/acme/widgets.git"
  prompt = "p"
  egress {
    provider_fetch = ["web-search"]
  }
}
`)
	if len(diags) != 1 || diags[0].Subject == nil || diags[0].Subject.Start.Line != 8 {
		t.Fatalf("diagnostics %v, want one at line 8", diags)
	}
	for _, w := range []string{`"web-search"`, `Did you mean "web_search"?`, `"code_execution", "mcp_servers", "url_sources", "web_fetch" and "web_search"`, `node "fix"`} {
		if !strings.Contains(diags[0].Detail, w) {
			t.Errorf("detail %q lacks %q", diags[0].Detail, w)
		}
	}

	p, diags := ParsePolicy([]byte("policy {\n  provider_fetch = []\n}\n"), "p.hcl")
	if diags.HasErrors() || p.ProviderFetch == nil || len(p.ProviderFetch) != 0 {
		t.Errorf("policy provider_fetch = [] decoded as %#v (%v), want an empty, non-nil list", p.ProviderFetch, diags)
	}
	p, diags = ParsePolicy([]byte("policy {\n  provider_fetch = [\"web_fetch\"]\n}\n"), "p.hcl")
	if diags.HasErrors() || !cmp.Equal(p.ProviderFetch, []string{"web_fetch"}) {
		t.Errorf("policy provider_fetch decoded as %#v (%v)", p.ProviderFetch, diags)
	}
}
