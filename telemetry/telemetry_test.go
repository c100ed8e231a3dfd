package telemetry_test

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kewplan/kewplan/executor"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/executor/statedir"
	"github.com/kewplan/kewplan/executor/verdict"
	"github.com/kewplan/kewplan/internal/testtools/collector"
	"github.com/kewplan/kewplan/internal/testtools/redacttest"
	"github.com/kewplan/kewplan/runners"
	"github.com/kewplan/kewplan/telemetry"
)

func TestEnabled(t *testing.T) {
	for _, tc := range []struct {
		env   map[string]string
		force bool
		want  bool
	}{
		{nil, false, false},
		{nil, true, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, false, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, false, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, false, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "TRUE"}, true, false},
	} {
		if got := telemetry.Enabled(func(k string) string { return tc.env[k] }, tc.force); got != tc.want {
			t.Errorf("Enabled(%v, force %v) = %v, want %v", tc.env, tc.force, got, tc.want)
		}
	}
}

func TestNewRefusesAnUnknownProtocol(t *testing.T) {
	env := map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}
	_, err := telemetry.New(t.Context(), telemetry.Options{Getenv: func(k string) string { return env[k] }})
	if err == nil || !strings.Contains(err.Error(), `OTEL_EXPORTER_OTLP_PROTOCOL "http/json"`) || !strings.Contains(err.Error(), "grpc") {
		t.Fatalf("New with http/json: %v, want a refusal naming the variable and what to set", err)
	}
}

// canaries are the values an exported attribute must never hold, in any spelling: a credential the plan forwards
// and a secret the engine registers during the run (a placeholder).
const (
	canaryKey         = "sk-ant-api03-canary-telemetry-0123456789abcdef"
	canaryPlaceholder = "kewplan-placeholder-canary-fedcba9876543210"
)

// hostileNode is a node name written to get out of whatever it lands in: a shell, HTML, a terminal, JSON.
const hostileNode = "x\"$(id)<script>\x1b[2J\u202e"

// synthRun feeds an exporter the events of a two-node apply whose strings carry both canaries in the places an
// agent controls (the model it reports, the host it asks for, its verdict), against a ledger holding the
// attempts and brokered calls.
func synthRun(t *testing.T, exp *telemetry.Exporter, stateDir string) {
	t.Helper()
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	l, err := ledger.Open(statedir.Dir{Root: stateDir}.Ledger())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	runID := "run-synth"
	if err := l.StartRun(ledger.RunRecord{ID: runID, Status: ledger.RunRunning, StartedAt: t0, ConfigDigest: "cfg"}); err != nil {
		t.Fatal(err)
	}
	at := func(s int) *time.Time { v := t0.Add(time.Duration(s) * time.Second); return &v }
	exit1, exit0 := int64(1), int64(0)
	cost := 0.25
	for _, a := range []ledger.AttemptRecord{
		{RunID: runID, Node: "fix", Attempt: 1, Status: ledger.StatusFailed, ExitCode: &exit1, StopClass: "api_error", RetryWait: time.Second, StartedAt: at(1), EndedAt: at(5), InputTokens: 10, OutputTokens: 2},
		{RunID: runID, Node: "fix", Attempt: 2, Status: ledger.StatusSucceeded, ExitCode: &exit0, StartedAt: at(6), EndedAt: at(9), InputTokens: 100, OutputTokens: 20, CostUSD: &cost},
	} {
		if err := l.RecordAttempt(a); err != nil {
			t.Fatal(err)
		}
	}
	firstByte := int64(250)
	for _, r := range []ledger.BrokerRequest{
		{RunID: runID, Node: "fix", Attempt: 1, Method: "POST", Host: "api.anthropic.com", Path: "/v1/messages", Status: 529, DurationMS: 300, Time: t0.Add(4 * time.Second), ModelCall: true, Model: "m " + canaryPlaceholder},
		{RunID: runID, Node: "fix", Attempt: 2, Method: "POST", Host: "api.anthropic.com", Path: "/v1/messages?k=" + canaryKey, Status: 200, DurationMS: 800, FirstByteMS: &firstByte, Time: t0.Add(8 * time.Second),
			ModelCall: true, Metered: true, Model: "claude-sonnet-4-5", InputTokens: 1200, OutputTokens: 30, CostUSD: &cost, CostSource: "estimated"},
	} {
		if err := l.RecordBrokerRequest(r); err != nil {
			t.Fatal(err)
		}
	}
	exp.ApplyStart(executor.ApplyStartEvent{RunID: runID, StateDir: stateDir, ConfigDigest: "cfg", Nodes: []string{"fix", "review"}, Parallelism: 2, Time: t0})
	exp.RunSecret(canaryPlaceholder)
	exp.NodeStart(executor.NodeStartEvent{RunID: runID, Node: "fix", Runner: "claude-code", Model: "claude-sonnet-4-5", Time: t0})
	for i, step := range []string{"checkout", "container", "push"} {
		exp.NodePhase(executor.NodePhaseEvent{RunID: runID, Node: "fix", Attempt: 2, Phase: step, Start: t0.Add(time.Duration(6+i) * time.Second), End: t0.Add(time.Duration(7+i) * time.Second)})
	}
	exp.NodeRetry(executor.NodeRetryEvent{RunID: runID, Node: "fix", Attempt: 1, NextAttempt: 2, MaxAttempts: 2, Class: "api_error", Reason: "agent said " + canaryKey, Wait: time.Second, Time: t0.Add(5 * time.Second)})
	exp.EgressDenied(ledger.EgressDenial{RunID: runID, Node: "fix", Method: "CONNECT", Host: base64.StdEncoding.EncodeToString([]byte(canaryKey)) + ".evil.test", Port: 443, Reason: "not_allowed", Time: t0.Add(7 * time.Second)})
	exp.NodeDone(ledger.NodeResult{RunID: runID, Node: "fix", Runner: "claude-code", Role: "worker", Image: "img", Model: "claude-sonnet-4-5", Status: ledger.StatusSucceeded,
		ExitCode: &exit0, Attempts: 2, Started: t0, Ended: t0.Add(10 * time.Second), CostUSD: &cost, CostSource: ledger.CostReported,
		Totals: runnersTotals(110, 22, "claude-sonnet-4-5 "+canaryKey), Reason: "quoting the agent: " + canaryKey})
	exp.NodeDone(ledger.NodeResult{RunID: runID, Node: "review", Runner: "claude-code", Role: "reviewer", Model: "claude-sonnet-4-5", Status: ledger.StatusApproved,
		Started: t0.Add(10 * time.Second), Ended: t0.Add(12 * time.Second),
		Verdict: &verdict.Verdict{Verdict: "approve", Summary: "<script>" + canaryKey + "</script>", SHA256: "abc"}})
	exp.NodeDone(ledger.NodeResult{RunID: runID, Node: hostileNode, Runner: "claude-code", Status: ledger.StatusSkipped, Ended: t0.Add(12 * time.Second)})
	exp.ApplyDone(executor.ApplySummary{RunID: runID, Status: ledger.RunSucceeded, Started: t0, Ended: t0.Add(12 * time.Second), InputTokens: 110, OutputTokens: 22, EgressDeniedTotal: 1})
}

// TestExportToARealCollector sends a synthetic apply to a real OpenTelemetry Collector over OTLP/HTTP and gRPC, and
// reads what its file exporter wrote: one trace, the apply's span with a node span per node, attempt spans under
// them and the brokered calls under their attempts, the GenAI attribute names, both meters as separate series,
// and no canary value in any spelling.
func TestExportToARealCollector(t *testing.T) {
	collector.Need(t)
	for _, proto := range []string{"http/protobuf", "grpc"} {
		t.Run(strings.ReplaceAll(proto, "/", "-"), func(t *testing.T) {
			col := collector.Start(t)
			endpoint := col.HTTPEndpoint
			if proto == "grpc" {
				endpoint = col.GRPCEndpoint
			}
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", proto)
			t.Setenv("OTEL_SERVICE_NAME", "kewplan-test")
			t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=ci")
			var warnings []string
			exp, err := telemetry.New(t.Context(), telemetry.Options{
				Getenv: os.Getenv, Secrets: []string{canaryKey}, PlanDigest: "sha256:plan", Engine: "docker", Version: "test",
				Warn: func(s string) { warnings = append(warnings, s) }, FlushTimeout: 2 * time.Minute, // a backstop
			})
			if err != nil {
				t.Fatal(err)
			}
			synthRun(t, exp, filepath.Join(t.TempDir(), "state"))
			exp.Close()
			if len(warnings) > 0 {
				t.Errorf("warnings from a working collector: %q", warnings)
			}
			raw, got := col.Received(t)
			checkSynthTrace(t, got)
			for _, canary := range []string{canaryKey, canaryPlaceholder} {
				if leaks := redacttest.Leaks(string(raw), canary); len(leaks) > 0 {
					t.Errorf("the exported data holds %q:\n%s", canary, strings.Join(leaks, "\n"))
				}
			}
			if strings.Contains(string(raw), "</script>") || strings.Contains(string(raw), "quoting the agent") {
				t.Errorf("agent text (a verdict summary, a reason) was exported")
			}
		})
	}
}

func runnersTotals(in, out int64, model string) (r runners.RunTotals) {
	r.InputTokens, r.OutputTokens, r.Model = in, out, model
	return r
}

func checkSynthTrace(t *testing.T, got *collector.Data) {
	t.Helper()
	byName := map[string]collector.Span{}
	traces := map[string]bool{}
	for _, s := range got.Spans {
		byName[s.Name] = s
		traces[s.TraceID] = true
	}
	if len(traces) != 1 || len(got.Spans) != 11 {
		names := []string{}
		for _, s := range got.Spans {
			names = append(names, s.Name)
		}
		t.Fatalf("%d spans in %d traces, want 11 in one: %q", len(got.Spans), len(traces), names)
	}
	root := byName["kewplan apply"]
	for k, v := range map[string]string{"kewplan.run.id": "run-synth", "kewplan.plan.digest": "sha256:plan", "kewplan.engine": "docker", "kewplan.run.status": "succeeded", "gen_ai.usage.input_tokens": "110"} {
		if root.Attrs[k] != v {
			t.Errorf("apply span %s = %q, want %q", k, root.Attrs[k], v)
		}
	}
	if root.Resource["service.name"] != "kewplan-test" || root.Resource["deployment.environment.name"] != "ci" || root.Resource["service.version"] != "test" {
		t.Errorf("resource %v: want OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES and the version", root.Resource)
	}
	if h := byName["node "+hostileNode]; h.Attrs["kewplan.node"] != hostileNode || h.Attrs["kewplan.node.status"] != "skipped" {
		t.Errorf("the hostile node's span %q: attributes %v, want its name carried whole as data", h.Name, h.Attrs)
	}
	fix, review := byName["node fix"], byName["node review"]
	if fix.ParentSpanID != root.SpanID || review.ParentSpanID != root.SpanID {
		t.Errorf("node spans are not children of the apply's")
	}
	for k, v := range map[string]string{"kewplan.runner": "claude-code", "gen_ai.request.model": "claude-sonnet-4-5", "kewplan.node.status": "succeeded", "kewplan.exit_code": "0", "kewplan.attempts": "2", "gen_ai.usage.output_tokens": "22", "container.image.name": "img"} {
		if fix.Attrs[k] != v {
			t.Errorf("node fix %s = %q, want %q", k, fix.Attrs[k], v)
		}
	}
	if !strings.Contains(fix.Attrs["gen_ai.response.model"], "claude-sonnet-4-5 ") {
		t.Errorf("node fix gen_ai.response.model = %q", fix.Attrs["gen_ai.response.model"])
	}
	if review.Attrs["kewplan.verdict"] != "approve" {
		t.Errorf("review verdict %q", review.Attrs["kewplan.verdict"])
	}
	var evNames []string
	for _, e := range fix.Events {
		evNames = append(evNames, e.Name)
	}
	if fmt.Sprint(evNames) != "[kewplan.retry egress.denied]" {
		t.Errorf("node fix events %q, want the retry and the denial", evNames)
	}
	a1, a2 := byName["attempt 1"], byName["attempt 2"]
	if a1.ParentSpanID != fix.SpanID || a2.ParentSpanID != fix.SpanID || a1.Attrs["kewplan.attempt.stop_class"] != "api_error" || a1.Status != 2 || a2.Attrs["gen_ai.usage.input_tokens"] != "100" {
		t.Errorf("attempt spans %+v %+v", a1, a2)
	}
	for _, step := range []string{"checkout", "container", "push"} {
		if s := byName[step]; s.ParentSpanID != a2.SpanID {
			t.Errorf("step %s is not under attempt 2", step)
		}
	}
	var calls []collector.Span
	for _, s := range got.Spans {
		if s.Kind == 3 { // client
			calls = append(calls, s)
		}
	}
	if len(calls) != 2 {
		t.Fatalf("%d model call spans, want 2", len(calls))
	}
	for _, c := range calls {
		want := a1.SpanID
		if c.Attrs["http.response.status_code"] == "200" {
			want = a2.SpanID
			if c.Name != "chat claude-sonnet-4-5" || c.Attrs["gen_ai.usage.input_tokens"] != "1200" || c.Attrs["kewplan.meter"] != "proxy" || c.Attrs["gen_ai.operation.name"] != "chat" ||
				c.Attrs["kewplan.time_to_first_byte_ms"] != "250" {
				t.Errorf("answered call %+v", c)
			}
		}
		if c.ParentSpanID != want {
			t.Errorf("call %s (%s) is not under its attempt", c.Name, c.Attrs["http.response.status_code"])
		}
	}
	sums := map[string]float64{}
	for _, p := range got.Points {
		key := p.Metric + "|" + p.Attrs["kewplan.meter"] + "|" + p.Attrs["gen_ai.token.type"]
		sums[key] += p.Value
	}
	for k, v := range map[string]float64{
		"kewplan.tokens|agent|input": 110, "kewplan.tokens|proxy|input": 1200, "kewplan.tokens|proxy|output": 30,
		"kewplan.node.retries||": 1, "kewplan.egress.denials||": 1, "kewplan.model.calls||": 2, "gen_ai.client.token.usage||input": 1200,
		"kewplan.cost|agent|": 0.25, "kewplan.cost|proxy|": 0.25,
	} {
		if sums[k] != v {
			t.Errorf("metric %s = %v, want %v (all: %v)", k, sums[k], v, sums)
		}
	}
}

// TestUnreachableCollector: with nothing listening at the endpoint, the apply's events go through as always and
// the end of the run gives one warning naming the variable to check.
func TestUnreachableCollector(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.ClosedEndpoint(t))
	var warnings []string
	exp, err := telemetry.New(t.Context(), telemetry.Options{Getenv: os.Getenv, Warn: func(s string) { warnings = append(warnings, s) }, FlushTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	synthRun(t, exp, filepath.Join(t.TempDir(), "state"))
	exp.Close()
	if len(warnings) != 1 || !strings.Contains(warnings[0], "OpenTelemetry export failed") || !strings.Contains(warnings[0], "OTEL_EXPORTER_OTLP_ENDPOINT") {
		t.Fatalf("warnings %q, want one saying the export failed and what to check", warnings)
	}
}
