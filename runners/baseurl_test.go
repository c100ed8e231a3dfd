package runners

import (
	"slices"
	"testing"
)

// TestBaseURLsCoverTheBuiltins: every built-in has an entry, a variable's endpoint is one of the runner's, and
// every credential a brokerable runner declares has a known header.
func TestBaseURLsCoverTheBuiltins(t *testing.T) {
	want := map[string]string{"claude-code": "ANTHROPIC_BASE_URL", "hermes": "OPENROUTER_BASE_URL", "opencode": "", "pi": "", "lemonade": ""}
	for _, name := range BuiltinNames() {
		v, ok := BaseURLVariable(name)
		if !ok {
			t.Errorf("BaseURLVariable(%q): no entry", name)
			continue
		}
		if v != want[name] {
			t.Errorf("BaseURLVariable(%q) = %q, want %q", name, v, want[name])
		}
		if v == "" {
			continue
		}
		r, _ := Builtin(name)
		b, _ := BrokeredBaseURL(name)
		if !slices.Contains(r.Endpoints(), b.Endpoint) {
			t.Errorf("%s: endpoint %q is not among %v", name, b.Endpoint, r.Endpoints())
		}
		if b.API != "anthropic" && b.API != "openai" {
			t.Errorf("%s: API %q", name, b.API)
		}
		for _, c := range r.RequiredCredentials() {
			if h, ok := CredentialHeaderOf(c); !ok || h.Header == "" {
				t.Errorf("%s: credential %s has no header", name, c)
			}
		}
	}
	if _, ok := BaseURLVariable("no-such-runner"); ok {
		t.Error("BaseURLVariable of an unknown runner reported an entry")
	}
	if h, _ := CredentialHeaderOf("ANTHROPIC_API_KEY"); h != (CredentialHeader{Header: "x-api-key"}) {
		t.Errorf("ANTHROPIC_API_KEY travels in %+v, want x-api-key", h)
	}
	if h, _ := CredentialHeaderOf("CLAUDE_CODE_OAUTH_TOKEN"); h != (CredentialHeader{Header: "Authorization", Scheme: "Bearer"}) {
		t.Errorf("CLAUDE_CODE_OAUTH_TOKEN travels in %+v, want Authorization: Bearer", h)
	}
}
