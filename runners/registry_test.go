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

func TestDefinitions(t *testing.T) {
	claude, _ := Builtin("claude-code")
	opencode, _ := Builtin("opencode")
	type view struct {
		Name, Protocol string
		Credentials    []Credential
		Origins        []string
		Added          []string
		Args           []string
		Base           string
	}
	see := func(r Runner) view {
		v := view{Name: r.Name(), Protocol: r.Protocol(), Origins: CredentialOrigins(r), Args: r.ContainerArgs("M")}
		if d, ok := r.(*Definition); ok {
			v.Credentials, v.Added = d.Credentials(), d.Added()
			if d.Base() != nil {
				v.Base = d.Base().Name()
			}
		}
		return v
	}
	tests := []struct {
		name string
		r    Runner
		want view
	}{
		{
			name: "custom runner: every credential is the block's",
			r:    Custom("my-agent", "opencode", []string{"OPENROUTER_API_KEY", "EXTRA"}, []string{"--model", "x/M"}).DeclaredAt("main.hcl:3"),
			want: view{Name: "my-agent", Protocol: "opencode",
				Credentials: []Credential{{"OPENROUTER_API_KEY", "main.hcl:3"}, {"EXTRA", "main.hcl:3"}},
				Origins:     []string{"main.hcl:3", "main.hcl:3"}, Added: []string{"OPENROUTER_API_KEY", "EXTRA"},
				Args: []string{"--model", "x/M"}},
		},
		{
			name: "custom runner without DeclaredAt names its block",
			r:    Custom("bare", "pi", []string{"K"}, nil),
			want: view{Name: "bare", Protocol: "pi", Credentials: []Credential{{"K", `runner "bare"`}},
				Origins: []string{`runner "bare"`}, Added: []string{"K"}},
		},
		{
			name: "override adding a credential keeps the built-in's origin and flags the addition",
			r:    Override(claude, []string{"ANTHROPIC_API_KEY", "GITHUB_TOKEN"}, nil).DeclaredAt("main.hcl:9"),
			want: view{Name: "claude-code", Protocol: "claude-code", Base: "claude-code",
				Credentials: []Credential{{"ANTHROPIC_API_KEY", OriginBuiltin}, {"GITHUB_TOKEN", "main.hcl:9"}},
				Origins:     []string{OriginBuiltin, "main.hcl:9"}, Added: []string{"GITHUB_TOKEN"},
				Args: []string{"--dangerously-skip-permissions", "--verbose", "--output-format", "stream-json", "--model", "M"}},
		},
		{
			name: "override of args only keeps the built-in's credentials",
			r:    Override(opencode, nil, []string{"--format", "json", "--model", "openrouter/M", "--pure"}).DeclaredAt("a.hcl:1"),
			want: view{Name: "opencode", Protocol: "opencode", Base: "opencode",
				Credentials: []Credential{{"OPENROUTER_API_KEY", OriginBuiltin}}, Origins: []string{OriginBuiltin},
				Args: []string{"--format", "json", "--model", "openrouter/M", "--pure"}},
		},
		{
			name: "override to no credentials at all",
			r:    Override(opencode, []string{}, nil),
			want: view{Name: "opencode", Protocol: "opencode", Base: "opencode", Credentials: []Credential{},
				Origins: []string{}, Args: []string{"--format", "json", "--auto", "--model", "openrouter/M"}},
		},
		{
			name: "a built-in reports builtin origins",
			r:    claude,
			want: view{Name: "claude-code", Protocol: "claude-code", Origins: []string{OriginBuiltin, OriginBuiltin},
				Args: []string{"--dangerously-skip-permissions", "--verbose", "--output-format", "stream-json", "--model", "M"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, see(tt.r)); diff != "" {
				t.Errorf("definition mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDefinitionCopies: a Definition owns its slices; the caller's later edits do not leak in or out.
func TestDefinitionCopies(t *testing.T) {
	creds, args := []string{"A"}, []string{"--x"}
	d := Custom("c", "pi", creds, args)
	creds[0], args[0] = "B", "--y"
	d.ContainerArgs("")[0] = "--z"
	d.RequiredCredentials()[0] = "C"
	if diff := cmp.Diff([]string{"A"}, d.RequiredCredentials()); diff != "" {
		t.Errorf("credentials (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"--x"}, d.ContainerArgs("")); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
}

// TestDefinitionMeters: the protocol picks the meter; an unknown one still counts lines (cost-blind).
func TestDefinitionMeters(t *testing.T) {
	m := Custom("c", "claude-code", nil, nil).NewMeter("r")
	m.Line([]byte(`{"type":"result","is_error":false,"usage":{"input_tokens":4},"total_cost_usd":0.1}`))
	if got := m.Totals(); got.InputTokens != 4 || got.CostUSD == nil || !got.Finished {
		t.Errorf("claude-code protocol meter: got %+v", got)
	}
	b := Custom("c", "martian", nil, nil).NewMeter("r")
	for _, l := range []string{`{"type":"result","usage":{"input_tokens":4}}`, "prose", `{"a":1}`} {
		b.Line([]byte(l))
	}
	b.Oversized()
	want := RunTotals{Model: "r", ModelSource: ModelRouted, Events: 2, UnparsedLines: 1, OversizedLines: 1}
	if diff := cmp.Diff(want, b.Totals()); diff != "" {
		t.Errorf("unknown protocol meter (-want +got):\n%s", diff)
	}
}
