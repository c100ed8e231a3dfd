package runners

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBuiltins(t *testing.T) {
	type info struct {
		Protocol    string
		Credentials []string
		Args        []string
	}
	want := map[string]info{
		"claude-code": {"claude-code", []string{"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"},
			[]string{"--dangerously-skip-permissions", "--verbose", "--output-format", "stream-json", "--model", "claude-sonnet-4-5"}},
		"opencode": {"opencode", []string{"OPENROUTER_API_KEY"},
			[]string{"--format", "json", "--auto", "--model", "openrouter/anthropic/claude-sonnet-4.5"}},
		"pi": {"pi", []string{"OPENROUTER_API_KEY"},
			[]string{"--mode", "json", "--no-session", "--provider", "openrouter", "--model", "anthropic/claude-sonnet-4.5"}},
		"hermes": {"hermes", []string{"OPENROUTER_API_KEY"},
			[]string{"--format", "stream-json", "--yolo", "--provider", "openrouter", "--model", "anthropic/claude-sonnet-4.5"}},
		"lemonade": {"lemonade", nil,
			[]string{"--mode", "json", "--no-session", "--provider", "lemonade", "--model", "Qwen3.5-35B-A3B-GGUF"}},
	}
	models := map[string]string{
		"claude-code": "claude-sonnet-4-5", "opencode": "anthropic/claude-sonnet-4.5", "pi": "anthropic/claude-sonnet-4.5",
		"hermes": "anthropic/claude-sonnet-4.5", "lemonade": "Qwen3.5-35B-A3B-GGUF",
	}
	got := map[string]info{}
	for _, name := range BuiltinNames() {
		r, ok := Builtin(name)
		if !ok {
			t.Fatalf("Builtin(%q) missing though BuiltinNames lists it", name)
		}
		if r.Name() != name {
			t.Errorf("Builtin(%q).Name() = %q", name, r.Name())
		}
		got[name] = info{r.Protocol(), r.RequiredCredentials(), r.ContainerArgs(models[name])}
		if r.NewMeter("x") == nil {
			t.Errorf("Builtin(%q).NewMeter returned nil", name)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("built-in runners mismatch (-want +got):\n%s", diff)
	}
	// A model already in opencode's provider/model form is not prefixed twice.
	oc, _ := Builtin("opencode")
	if diff := cmp.Diff(want["opencode"].Args, oc.ContainerArgs("openrouter/anthropic/claude-sonnet-4.5")); diff != "" {
		t.Errorf("opencode args for a prefixed model (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"claude-code", "hermes", "lemonade", "opencode", "pi"}, BuiltinNames()); diff != "" {
		t.Errorf("BuiltinNames() mismatch (-want +got):\n%s", diff)
	}
	if _, ok := Builtin("claude"); ok {
		t.Error(`Builtin("claude") found; only exact names are built-ins`)
	}
	for _, p := range append(Protocols(), "lemonade") {
		if _, ok := NewMeter(p, ""); !ok {
			t.Errorf("NewMeter(%q) unknown, but it is a protocol", p)
		}
	}
	if _, ok := NewMeter("codex", ""); ok {
		t.Error(`NewMeter("codex") known; want unknown`)
	}
}

// TestBuiltinCredentialsAreCopies: a caller that appends to the list must not widen the built-in.
func TestBuiltinCredentialsAreCopies(t *testing.T) {
	r, _ := Builtin("opencode")
	c := r.RequiredCredentials()
	c[0] = "ANTHROPIC_API_KEY"
	_ = append(c, "GITHUB_TOKEN")
	if diff := cmp.Diff([]string{"OPENROUTER_API_KEY"}, r.RequiredCredentials()); diff != "" {
		t.Errorf("built-in credentials changed by a caller (-want +got):\n%s", diff)
	}
}

func TestBuiltinEndpoints(t *testing.T) {
	want := map[string][]string{
		"claude-code": {"api.anthropic.com"}, "opencode": {"openrouter.ai"}, "pi": {"openrouter.ai"},
		"hermes": {"openrouter.ai"}, "lemonade": nil,
	}
	got := map[string][]string{}
	for _, name := range BuiltinNames() {
		r, _ := Builtin(name)
		got[name] = r.Endpoints()
		if eps := r.Endpoints(); len(eps) > 0 {
			eps[0] = "widened.example" // a caller's change must not reach the built-in
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Endpoints() mismatch (-want +got):\n%s", diff)
	}
	r, _ := Builtin("claude-code")
	if r.Endpoints()[0] != "api.anthropic.com" {
		t.Error("Endpoints() shares its slice with the built-in")
	}
}
