//go:build linux

package executor

// Malicious names (E2) and the name validators' fuzz target (G3): a credential name, a network name and a node
// name each travel from HCL into the docker argv and the Engine API call, so each must be a name and never a flag.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/executor/engine"
	"github.com/kewplan/kewplan/planner"
)

var (
	// The rules the validators must implement (security notes §3.9 and Docker's own name rules).
	credentialRule = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	networkRule    = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)
	nodeRule       = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]*$`)
)

// hclQuote renders s as an HCL quoted string, escaping what HCL would otherwise read as syntax; false when s is
// not UTF-8 (HCL source must be).
func hclQuote(s string) (string, bool) {
	if !utf8.ValidString(s) {
		return "", false
	}
	var b strings.Builder
	b.WriteByte('"')
	for i, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case (r == '$' || r == '%') && i+1 < len(s) && s[i+1] == '{':
			b.WriteRune(r)
			b.WriteRune(r)
		case r > 0xffff && !unicode.IsPrint(r):
			fmt.Fprintf(&b, `\U%08x`, r)
		case !unicode.IsPrint(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String(), true
}

// planNames loads and plans one configuration with the given quoted credential, network and node name.
func planNames(t *testing.T, credential, network, node string) (*config.Config, *planner.Plan, hcl.Diagnostics) {
	t.Helper()
	dir := t.TempDir()
	src := fmt.Sprintf(`sandbox {
  allowlist_network = %s
  memory            = "256m"
  images            = { evil = "kewplan-test/names:1" }
}
runner "evil" {
  protocol    = "claude-code"
  credentials = [%s]
  args        = ["--model", "${model}"]
}
node %s {
  runner = "evil"
  model  = "m"
  repo   = "https://example.invalid/r.git"
  prompt = "p"
}
`, network, credential, node)
	path := filepath.Join(dir, "main.hcl")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := config.Load(path)
	if diags.HasErrors() {
		return nil, nil, diags
	}
	p, pd := planner.Build(cfg, planner.Inputs{Vars: map[string]cty.Value{}, FS: config.DirFS(dir)})
	return cfg, p, append(diags, pd...)
}

// TestAdvMaliciousCredentialNames (E2): names that would be flags, assignments or several words.
func TestAdvMaliciousCredentialNames(t *testing.T) {
	c := adv(t, "E2", "forward credentials named FOO=bar, --privileged, -v, \"A B\", a non-ASCII name, the empty string, a newline, a shell word",
		"rejected at plan (so apply refuses before docker is invoked); never echoed; never in argv or the Engine API env")
	bad := []string{"FOO=bar", "--privileged", "-v", "A B", "ÄPFEL", "", "X\nY", "X;rm -rf /", "$(id)"}
	for _, name := range bad {
		q, _ := hclQuote(name)
		_, p, diags := planNames(t, q, `"kew-allowlist"`, `"n"`)
		np := (*planner.NodePlan)(nil)
		if p != nil {
			np = p.Node("n")
		}
		refused := diags.HasErrors() && (np == nil || np.Container == nil || np.Errors)
		echoed := name != "" && len(name) > 2 && strings.Contains(config.DiagnosticsText(diags), name)
		c.check(refused && !echoed, "%q: refused %v, echoed %v", name, refused, echoed)
		if np != nil && np.Container != nil {
			c.check(!slices.Contains(np.Container.Argv(), name), "%q is not in the argv", name)
		}
	}
	// The executor's own last check, for a container that did not come from a plan: each bad name is refused
	// before the engine is called, and the error does not echo it.
	for _, name := range bad {
		_, err := engine.ContainerConfig(&planner.Container{Name: "kew-n", Node: "n", RunID: "r", Checkout: "/tmp/x", Image: "i", Network: "n",
			PidsLimit: 1, Env: []string{"OK_NAME", name}}, engine.EnvMap([]string{"FOO=bar=secret", "--privileged=1", "A B=x", "=x", "OK_NAME=1"}))
		c.check(err != nil && (len(name) < 3 || !strings.Contains(err.Error(), name)), "ContainerConfig(%q): %v", name, err)
	}
	// And apply: the plan's error stops it before any container.
	f := advFixture(t)
	q, _ := hclQuote("--privileged")
	cfg := f.config(fmt.Sprintf("runner \"claude-code\" {\n  credentials = [%s]\n}\n", q) + advNode("x", "reviewer", "mode=succeed", ""))
	p, _ := planner.Build(cfg, planner.Inputs{Vars: map[string]cty.Value{}, FS: config.DirFS(cfg.Dir)})
	_, err := Apply(context.Background(), ApplyOptions{Config: cfg, Plan: p, StateDir: f.stateDir, Environ: os.Environ()})
	_, statErr := os.Stat(filepath.Join(f.stateDir, "checkouts"))
	c.check(err != nil && os.IsNotExist(statErr), "apply: %v", err)
}

// FuzzAdvNames (G3): whatever the name, a credential, network or node name is accepted exactly when it matches
// its rule, and an accepted one is never read as a flag.
func FuzzAdvNames(f *testing.F) {
	for _, s := range []string{"ANTHROPIC_API_KEY", "_x", "FOO=bar", "--privileged", "-v", "A B", "ÄPFEL", "", "x-y",
		"kew-allowlist", "a.b_c-d", ".hidden", "-net", "${HOME}", "%{ if true }x%{ endif }", "a\nb", "n\x00", "9lives",
		"host", "node-with-a-name-that-is-far-too-long-to-be-a-container-hostname", "\u202eevil", "x\"y", `x\y`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, ok := hclQuote(s)
		if !ok {
			t.Skip("not UTF-8: HCL source cannot hold it")
		}
		// Credential name.
		_, p, diags := planNames(t, q, `"kew-allowlist"`, `"n"`)
		var np *planner.NodePlan
		if p != nil {
			np = p.Node("n")
		}
		accepted := !diags.HasErrors() && np != nil && np.Container != nil
		if accepted != credentialRule.MatchString(s) {
			t.Fatalf("credential %q: accepted %v, rule says %v (%s)", s, accepted, credentialRule.MatchString(s), config.DiagnosticsText(diags))
		}
		if accepted {
			if strings.HasPrefix(s, "-") || !slices.Equal(np.Container.Env, []string{s}) {
				t.Fatalf("credential %q became env %q", s, np.Container.Env)
			}
		}
		// Network name.
		_, p, diags = planNames(t, `"X"`, q, `"n"`)
		accepted = !diags.HasErrors() && p != nil && p.Node("n") != nil && p.Node("n").Container != nil
		if accepted != networkRule.MatchString(s) {
			t.Fatalf("network %q: accepted %v, rule says %v (%s)", s, accepted, networkRule.MatchString(s), config.DiagnosticsText(diags))
		}
		if accepted && (strings.HasPrefix(s, "-") || p.Node("n").Container.Network != s) {
			t.Fatalf("network %q became %q", s, p.Node("n").Container.Network)
		}
		// Node name (a block label, then the container name kew-<node> and a label value).
		_, p, diags = planNames(t, `"X"`, `"kew-allowlist"`, q)
		accepted = !diags.HasErrors() && p != nil && p.Node(s) != nil && p.Node(s).Container != nil
		want := nodeRule.MatchString(s) && len(s) <= 59
		if accepted != want {
			t.Fatalf("node %q: accepted %v, rule says %v (%s)", s, accepted, want, config.DiagnosticsText(diags))
		}
		if accepted && p.Node(s).Container.Name != planner.ContainerPrefix+s {
			t.Fatalf("node %q became container %q", s, p.Node(s).Container.Name)
		}
	})
}
