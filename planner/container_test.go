package planner

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestContainerArgv(t *testing.T) {
	tests := []struct {
		name string
		c    Container
		want string
	}{
		{
			name: "every optional part",
			c: Container{Name: "kew-fix", Node: "fix", RunID: RunPlaceholder, Checkout: CheckoutPlaceholder,
				Image: "kew-agent@sha256:abc", Network: "kew-allowlist", PidsLimit: 512, Memory: "4g", CPUs: "1.5",
				Env:  []string{"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"},
				Args: []string{"--dangerously-skip-permissions", "--verbose", "--output-format", "stream-json", "--model", "claude-sonnet-4-5"}},
			want: "docker run --rm --name kew-fix --read-only --tmpfs /tmp " +
				"--tmpfs /home/agent:exec,uid=1001,gid=1001,mode=0700 --cap-drop ALL --security-opt no-new-privileges " +
				"--pids-limit 512 --network kew-allowlist --memory 4g --cpus 1.5 " +
				"--label kewplan.node=fix --label kewplan.run=<run> -v <checkout>:/work -w /work " +
				"-e ANTHROPIC_API_KEY -e CLAUDE_CODE_OAUTH_TOKEN kew-agent@sha256:abc " +
				"--dangerously-skip-permissions --verbose --output-format stream-json --model claude-sonnet-4-5",
		},
		{
			name: "runtime",
			c: Container{Name: "kew-a", Node: "a", RunID: "r1", Checkout: "/tmp/co", Image: "img", Network: "kew-allowlist",
				Runtime: "runsc", PidsLimit: 64},
			want: "docker run --rm --name kew-a --runtime runsc --read-only --tmpfs /tmp " +
				"--tmpfs /home/agent:exec,uid=1001,gid=1001,mode=0700 --cap-drop ALL --security-opt no-new-privileges " +
				"--pids-limit 64 --network kew-allowlist --label kewplan.node=a --label kewplan.run=r1 -v /tmp/co:/work -w /work img",
		},
		{
			name: "no memory, cpus, credentials or args",
			c: Container{Name: "kew-a", Node: "a", RunID: "r1", Checkout: "/tmp/co", Image: "img", Network: "bridge",
				PidsLimit: 64},
			want: "docker run --rm --name kew-a --read-only --tmpfs /tmp " +
				"--tmpfs /home/agent:exec,uid=1001,gid=1001,mode=0700 --cap-drop ALL --security-opt no-new-privileges " +
				"--pids-limit 64 --network bridge --label kewplan.node=a --label kewplan.run=r1 -v /tmp/co:/work -w /work img",
		},
		{
			name: "planned allowlist node: sized tmpfs, closed DNS, proxy variables by name",
			c: Container{Name: "kew-fix", Node: "fix", RunID: RunPlaceholder, Checkout: CheckoutPlaceholder,
				Image: "img", Network: "kew-allowlist", PidsLimit: 512, TmpfsSize: "256m", DNS: []string{ClosedDNS},
				Proxied: true, Env: []string{"ANTHROPIC_API_KEY"}},
			want: "docker run --rm --name kew-fix --read-only --tmpfs /tmp:rw,noexec,nosuid,nodev,size=256m " +
				"--tmpfs /home/agent:exec,uid=1001,gid=1001,mode=0700,size=256m --cap-drop ALL --security-opt no-new-privileges " +
				"--pids-limit 512 --network kew-allowlist --dns 127.0.0.1 " +
				"--label kewplan.node=fix --label kewplan.run=<run> -v <checkout>:/work -w /work " +
				"-e ANTHROPIC_API_KEY -e HTTPS_PROXY -e HTTP_PROXY -e https_proxy -e http_proxy " +
				"-e NO_PROXY=localhost,127.0.0.1,::1 img",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(strings.Fields(tt.want), tt.c.Argv()); diff != "" {
				t.Errorf("Argv() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHostOwned(t *testing.T) {
	tests := []struct {
		arg, prompt string
		owned       bool
	}{
		{"--model", "", false},
		{"claude-sonnet-4-5", "", false},
		{"openrouter/anthropic/claude-sonnet-4", "", false},
		{"--resume", "", true},
		{"--continue", "", true},
		{"--session-id", "", true},
		{"--session-id=abc", "", true},
		{"--print", "", true},
		{"-p", "", true},
		{"/etc/passwd", "", true},
		{"--settings=/home/me/s.json", "", true},
		{"/work/.kew/settings.json", "", false},
		{"/work", "", false},
		{"/work/../etc", "", true},
		{"Fix the flaky test", "Fix the flaky test", true},
		{"claude-sonnet-4-5", "Use claude-sonnet-4-5 to fix it", false},
	}
	for _, tt := range tests {
		if got := hostOwned(tt.arg, tt.prompt) != ""; got != tt.owned {
			t.Errorf("hostOwned(%q, %q) = %v, want %v", tt.arg, tt.prompt, got, tt.owned)
		}
	}
}

func TestCarriesModel(t *testing.T) {
	tests := []struct {
		args  []string
		model string
		want  bool
	}{
		{[]string{"--model", "m"}, "m", true},
		{[]string{"--model=m"}, "m", true},
		{[]string{"--model", "openrouter/qwen/q"}, "qwen/q", true},
		{[]string{"--model", "mm"}, "m", false},
		{nil, "m", false},
	}
	for _, tt := range tests {
		if got := carriesModel(tt.args, tt.model); got != tt.want {
			t.Errorf("carriesModel(%q, %q) = %v, want %v", tt.args, tt.model, got, tt.want)
		}
	}
}

// A credential entry that is not a name may be the secret itself: the diagnostic never repeats it.
func TestDescribeCredentialNeverEchoes(t *testing.T) {
	for _, entry := range []string{"KEY=sk-canary-value", "sk-canary-value", "-e sk-canary-value", "sk canary value", "1skcanaryvalue", "=sk-canary-value"} {
		got := describeCredential(0, entry)
		if strings.Contains(got, "canary") {
			t.Errorf("describeCredential(%q) = %q: it echoes the entry", entry, got)
		}
	}
	if got := describeCredential(0, "KEY=v"); !strings.Contains(got, `"KEY"`) {
		t.Errorf("describeCredential names the variable before \"=\": got %q", got)
	}
}

func TestShellQuote(t *testing.T) {
	tests := map[string]string{
		"":                  "''",
		"--model":           "--model",
		"kewplan.run=<run>": "'kewplan.run=<run>'",
		"it's":              `'it'\''s'`,
		"a b":               "'a b'",
		"/home/agent:exec,uid=1001,gid=1001,mode=0700": "/home/agent:exec,uid=1001,gid=1001,mode=0700",
	}
	for in, want := range tests {
		if got := ShellQuote(in); got != want {
			t.Errorf("ShellQuote(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRulesCatalogue(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range Rules() {
		if seen[r.ID] {
			t.Errorf("duplicate rule %s", r.ID)
		}
		seen[r.ID] = true
		if r.Summary == "" || r.Description == "" || r.Help == "" {
			t.Errorf("rule %s lacks a summary, description or help", r.ID)
		}
		if r.Severity != SeverityError && r.Severity != SeverityWarning {
			t.Errorf("rule %s has severity %q", r.ID, r.Severity)
		}
	}
	for _, id := range []string{RuleUnknownRunner, RuleUnmappedRunner, RuleCredentiallessRunner, RuleCredentialByValue,
		RuleHostOwnedArg, RuleModelNotRouted, RuleEmptyPrompt, RuleDependencyCycle, RuleUnknownDependency,
		RuleOpenNetworkCredentials, RuleImageNotPinned, RuleNoMemoryLimit} {
		if !seen[id] {
			t.Errorf("rule %s is not in the catalogue", id)
		}
	}
}

func TestContainerEngineFields(t *testing.T) {
	c := Container{TmpfsSize: "512m", Proxied: true}
	got := map[string]any{"tmpfs": c.TmpfsMounts(), "proxy": c.ProxyEnv(), "fixed": c.FixedEnv()}
	want := map[string]any{
		"tmpfs": map[string]string{"/tmp": "rw,noexec,nosuid,nodev,size=512m", "/home/agent": "exec,uid=1001,gid=1001,mode=0700,size=512m"},
		"proxy": []string{"HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"},
		"fixed": []string{"NO_PROXY=localhost,127.0.0.1,::1"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("engine fields mismatch (-want +got):\n%s", diff)
	}
	unproxied := Container{}
	if unproxied.ProxyEnv() != nil || unproxied.FixedEnv() != nil {
		t.Error("a container that is not proxied gets proxy variables")
	}
}
