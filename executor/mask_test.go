package executor

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/egress"
	"github.com/kewplan/kewplan/executor/adapter"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/internal/testtools/redacttest"
	"github.com/kewplan/kewplan/planner"
)

func maskApplier(env map[string]string, runSecrets ...string) *applier {
	a := &applier{
		env: env,
		opts: ApplyOptions{Plan: &planner.Plan{Nodes: []*planner.NodePlan{
			{Name: "fix", Credentials: []string{"ANTHROPIC_API_KEY"}},
			{Name: "short", Credentials: []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY"}},
		}}},
	}
	for _, v := range runSecrets {
		a.addSecret(v, "proxy secret") // as the engine registers its egress proxy's secrets
	}
	return a
}

// writeLogs writes stdout and stderr through a node's masked log writers, cut into small writes.
func writeLogs(t *testing.T, a *applier, names []string, stdout, stderr string) (string, string) {
	t.Helper()
	var o, e bytes.Buffer
	mo, me, flush := a.maskedLogs(names, &o, &e)
	for _, p := range []struct {
		w interface{ Write([]byte) (int, error) }
		s string
	}{{mo, stdout}, {me, stderr}} {
		for s := p.s; len(s) > 0; {
			n := min(5, len(s))
			p.w.Write([]byte(s[:n]))
			s = s[n:]
		}
	}
	if err := flush(); err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String()
}

// TestMaskedLogsHideEveryEncoding: a node's stored logs hold its credential in no decoded form.
func TestMaskedLogsHideEveryEncoding(t *testing.T) {
	a := maskApplier(map[string]string{"ANTHROPIC_API_KEY": redacttest.Key})
	for _, c := range redacttest.Cases(redacttest.Key) {
		out, errs := writeLogs(t, a, []string{"ANTHROPIC_API_KEY"}, c.Stdout+"\n", c.Stderr+"\n")
		for _, s := range []string{out, errs} {
			if leaks := redacttest.Leaks(s, redacttest.Key); len(leaks) > 0 {
				t.Errorf("%s: stored log shows the key: %s", c.Name, strings.Join(leaks, "\n"))
			}
		}
	}
}

// TestMaskedLogsHideTheProxySecret: the node's egress proxy secret travels in HTTPS_PROXY, which an agent can
// print (env, a curl -v trace); it is masked like a credential, in every encoding.
func TestMaskedLogsHideTheProxySecret(t *testing.T) {
	secret := "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	proxy := egress.ProxyURL("172.30.0.2", egress.DefaultPort, "fix", secret)
	a := maskApplier(map[string]string{"ANTHROPIC_API_KEY": redacttest.Key}, secret)
	for _, c := range redacttest.Cases(secret) {
		out, errs := writeLogs(t, a, []string{"ANTHROPIC_API_KEY"}, c.Stdout+"\n", "HTTPS_PROXY="+proxy+"\n"+c.Stderr+"\n")
		for _, s := range []string{out, errs} {
			if leaks := redacttest.Leaks(s, secret); len(leaks) > 0 {
				t.Errorf("%s: stored log shows the proxy secret: %s", c.Name, strings.Join(leaks, "\n"))
			}
		}
	}
	// Without credentials or run secrets, the masker masks nothing (and costs nothing).
	if m := maskApplier(nil).nodeMasker(nil); !m.Empty() {
		t.Error("a node without run secrets and credentials masks something")
	}
}

// TestShortCredentialWarnings: a value too short to mask is named by preflight, with the rule's id.
func TestShortCredentialWarnings(t *testing.T) {
	a := maskApplier(map[string]string{"ANTHROPIC_API_KEY": redacttest.Key, "OPENAI_API_KEY": "abc"})
	got := a.shortCredentialWarnings()
	if len(got) != 1 || !strings.HasPrefix(got[0], planner.RuleCredentialTooShortToMask+`: node "short": the value of OPENAI_API_KEY is 3 bytes`) {
		t.Errorf("shortCredentialWarnings() = %q", got)
	}
	if _, ok := planner.LookupRule(planner.RuleCredentialTooShortToMask); !ok {
		t.Error("the rule is not in the catalogue")
	}
	// A brokered node's values never reach its container: nothing is forwarded, so nothing is warned of.
	for _, np := range a.opts.Plan.Nodes {
		np.CredentialMode = config.CredentialsBrokered
	}
	if got := a.shortCredentialWarnings(); len(got) != 0 {
		t.Errorf("shortCredentialWarnings() for brokered nodes = %q, want none", got)
	}
}

// A policy that sets refuse_unmaskable_credentials turns the warning into a refusal before anything starts.
func TestShortCredentialRefusedByPolicy(t *testing.T) {
	p := &planner.Plan{RefuseUnmaskableCredentials: true, Nodes: []*planner.NodePlan{{Name: "short", Credentials: []string{"OPENAI_API_KEY"}}}}
	_, err := Apply(context.Background(), ApplyOptions{Plan: p, StateDir: t.TempDir(), Environ: []string{"OPENAI_API_KEY=abc"},
		Engine: refusingEngine{}})
	var pe *PreflightError
	if !errors.As(err, &pe) || !strings.Contains(pe.Error(), planner.RuleCredentialTooShortToMask) || !strings.Contains(pe.Error(), "refuse_unmaskable_credentials") {
		t.Fatalf("Apply = %v, want a preflight refusal naming the rule and the policy", err)
	}
}

// refusingEngine is an engine whose preflight finds nothing and that must never be asked to run anything.
type refusingEngine struct{}

func (refusingEngine) Preflight(context.Context, *adapter.Run) ([]string, []string) { return nil, nil }
func (refusingEngine) Sweep(context.Context, *adapter.Run)                          {}
func (refusingEngine) Start(context.Context, *adapter.Run) error                    { panic("started") }
func (refusingEngine) Attempt(context.Context, *adapter.Attempt) *adapter.Failure   { panic("attempted") }
func (refusingEngine) End(context.Context, *adapter.Run)                            {}
func (refusingEngine) Abort(context.Context) []error                                { return nil }
func (refusingEngine) Close() error                                                 { return nil }

// deniedHook keeps the denials it hears of.
type deniedHook struct {
	NilHook
	got []string
}

func (h *deniedHook) EgressDenied(d ledger.EgressDenial) { h.got = append(h.got, d.Host, d.Refusal) }

// TestEgressDenialMasked: a credential an agent writes into the host it asks for is masked in the denial's host
// and refusal sentence before the ledger or a view sees them, also for a request without valid proxy credentials.
func TestEgressDenialMasked(t *testing.T) {
	a := maskApplier(map[string]string{"ANTHROPIC_API_KEY": redacttest.Key})
	h := &deniedHook{}
	a.hook = &syncHook{hooks: []Hook{h}}
	for _, node := range []string{"fix", ""} {
		a.egressDenied(ledger.EgressDenial{Node: node, Method: "CONNECT", Host: redacttest.Key + ".evil.example", Port: 443,
			Refusal: redacttest.Key + ".evil.example:443 is not in node fix's egress allowlist"})
	}
	if len(h.got) != 4 {
		t.Fatalf("heard %d strings, want 4", len(h.got))
	}
	for _, s := range h.got {
		if leaks := redacttest.Leaks(s, redacttest.Key); len(leaks) > 0 || !strings.Contains(s, "[redacted ANTHROPIC_API_KEY]") {
			t.Errorf("denial shows the key: %q", s)
		}
	}
}
