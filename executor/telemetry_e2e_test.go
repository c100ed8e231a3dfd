package executor_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kewplan/kewplan/egress"
	"github.com/kewplan/kewplan/executor"
	"github.com/kewplan/kewplan/executor/ledger"
	"github.com/kewplan/kewplan/internal/testtools/collector"
	"github.com/kewplan/kewplan/internal/testtools/redacttest"
	"github.com/kewplan/kewplan/telemetry"
)

// TestTelemetryOfAnApply applies three nodes on the real engine with the OpenTelemetry exporter sending to a real
// collector over OTLP/HTTP: a brokered worker whose first attempt meets an overloaded API and is retried (two
// model calls per attempt, to a stand-in provider billing 200,000 input tokens each), a reviewer that approves, and
// a node whose agent asks for a host its allowlist refuses. The collector's file holds one trace with the apply's
// span, a span per node and per attempt, the model calls under their attempts with the proxy's meter, the denial
// as an event, both meters as separate metric series, and neither the credential nor any placeholder.
func TestTelemetryOfAnApply(t *testing.T) {
	collector.Need(t)
	f := executor.NewTestFixture(t)
	col := collector.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	f.ModelStandIn(ctx, "200000")
	cfg := f.Config(`
node "%[1]sretry" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  role   = "reviewer"
  prompt = "mode=modelcalls\ncalls=2\nthen=apierror\nfinal_usage=none\ntokens=none\ncost=none"
  retry {
    attempts = 2
    backoff  = "1s"
  }
}
node "%[1]sreview" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  role   = "reviewer"
  prompt = "mode=verdict\nverdict=approve"
}
node "%[1]sdenied" {
  runner = "claude-code"
  model  = "claude-sonnet-4-5"
  repo   = %[2]q
  role   = "reviewer"
  prompt = "mode=egress\ntargets=evil.example.com:443\nverdict=approve"
}
`)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.HTTPEndpoint)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	key := executor.FakeAPIKey()
	var warnings []string
	// The flush timeout is a backstop: on a loaded machine the first export under the race detector can take
	// longer than the default's five seconds, which is not what this test is about.
	exp, err := telemetry.New(ctx, telemetry.Options{Getenv: os.Getenv, Secrets: []string{key}, Engine: "docker", Version: "test",
		Warn: func(s string) { warnings = append(warnings, s) }, FlushTimeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Close()
	sum, _, err := f.ApplyBrokered(ctx, cfg, key, exp)
	if err != nil {
		t.Fatal(err)
	}
	f.AssertClean(sum.RunID)
	if len(warnings) > 0 {
		t.Errorf("export warnings with a working collector: %q", warnings)
	}
	raw, got := col.Received(t)

	var root *collector.Span
	nodes := map[string]collector.Span{}
	traces := map[string]bool{}
	for i, s := range got.Spans {
		traces[s.TraceID] = true
		if s.Name == "kewplan apply" {
			root = &got.Spans[i]
		}
		if strings.HasPrefix(s.Name, "node ") {
			nodes[s.Attrs["kewplan.node"]] = s
		}
	}
	if root == nil || len(traces) != 1 {
		t.Fatalf("%d traces, apply span %v; want one trace with the apply's span (collector log:\n%s)", len(traces), root != nil, col.Log())
	}
	if root.Attrs["kewplan.run.id"] != sum.RunID || root.Attrs["kewplan.engine"] != "docker" || root.Attrs["kewplan.nodes"] != "3" {
		t.Errorf("apply span attributes %v", root.Attrs)
	}
	retry, review, denied := nodes[f.Node("retry")], nodes[f.Node("review")], nodes[f.Node("denied")]
	for name, n := range map[string]collector.Span{"retry": retry, "review": review, "denied": denied} {
		if n.ParentSpanID != root.SpanID || n.Attrs["kewplan.runner"] != "claude-code" || n.Attrs["gen_ai.request.model"] != "claude-sonnet-4-5" || !strings.HasPrefix(n.Attrs["container.image.id"], "sha256:") {
			t.Errorf("node %s span: parent %s (apply %s), attributes %v", name, n.ParentSpanID, root.SpanID, n.Attrs)
		}
	}
	if retry.Attrs["kewplan.node.status"] != ledger.StatusFailed || retry.Attrs["kewplan.attempts"] != "2" {
		t.Errorf("retry node span %v", retry.Attrs)
	}
	if review.Attrs["kewplan.verdict"] != "approve" {
		t.Errorf("review node span %v", review.Attrs)
	}
	var deniedEvents int
	for _, e := range denied.Events {
		if e.Name == "egress.denied" && e.Attrs["server.address"] == "evil.example.com" && e.Attrs["server.port"] == "443" {
			deniedEvents++
		}
	}
	if deniedEvents == 0 {
		// a denial the proxy's log delivered after the node ended is on the apply's span
		for _, e := range root.Events {
			if e.Name == "egress.denied" && e.Attrs["server.address"] == "evil.example.com" {
				deniedEvents++
			}
		}
	}
	if deniedEvents != 1 {
		t.Errorf("%d denial events for evil.example.com, want 1 (node events %v)", deniedEvents, denied.Events)
	}
	attempts := map[string]string{} // span id -> attempt number of the retry node
	for _, s := range got.Spans {
		if s.ParentSpanID == retry.SpanID && strings.HasPrefix(s.Name, "attempt ") {
			attempts[s.SpanID] = s.Attrs["kewplan.attempt"]
		}
	}
	if len(attempts) != 2 {
		t.Fatalf("%d attempt spans under the retried node, want 2", len(attempts))
	}
	// Each attempt's steps are its children: the checkout and the container, and for a reviewer the verdict.
	steps := map[string][]string{}
	for _, s := range got.Spans {
		if _, ok := attempts[s.ParentSpanID]; ok {
			steps[attempts[s.ParentSpanID]] = append(steps[attempts[s.ParentSpanID]], s.Name)
		}
	}
	for _, a := range []string{"1", "2"} {
		if !slices.Contains(steps[a], "checkout") || !slices.Contains(steps[a], "container") {
			t.Errorf("attempt %s's children %q, want its checkout and container", a, steps[a])
		}
	}
	var reviewSteps []string
	for _, s := range got.Spans {
		if s.Attrs["kewplan.node"] == f.Node("review") && s.ParentSpanID != review.SpanID && s.ParentSpanID != root.SpanID && !strings.HasPrefix(s.Name, "attempt ") {
			reviewSteps = append(reviewSteps, s.Name)
		}
	}
	slices.Sort(reviewSteps)
	if fmt.Sprint(reviewSteps) != "[checkout container verdict]" {
		t.Errorf("the reviewer's steps %q, want its checkout, container and verdict", reviewSteps)
	}
	perAttempt := map[string]int{}
	for _, s := range got.Spans {
		if s.Name != "chat claude-sonnet-4-5" || s.Attrs["kewplan.node"] != f.Node("retry") {
			continue
		}
		a, ok := attempts[s.ParentSpanID]
		if !ok || s.Attrs["gen_ai.usage.input_tokens"] != "200000" || s.Attrs["kewplan.meter"] != "proxy" || s.Attrs["http.response.status_code"] != "200" ||
			s.Attrs["kewplan.time_to_first_byte_ms"] == "" {
			t.Errorf("model call span: under attempt %q, attributes %v", a, s.Attrs)
		}
		perAttempt[a]++
	}
	if perAttempt["1"] != 2 || perAttempt["2"] != 2 {
		t.Errorf("model call spans by attempt %v, want 2 under each", perAttempt)
	}
	sums := map[string]float64{}
	for _, p := range got.Points {
		if p.Attrs["kewplan.node"] == f.Node("retry") {
			sums[p.Metric+"|"+p.Attrs["kewplan.meter"]+"|"+p.Attrs["gen_ai.token.type"]] += p.Value
		}
	}
	if sums["kewplan.tokens|proxy|input"] != 800000 || sums["kewplan.node.retries||"] != 1 || sums["kewplan.model.calls||"] != 4 {
		t.Errorf("retry node's metrics %v, want 800,000 proxy input tokens, 1 retry, 4 model calls", sums)
	}
	if leaks := redacttest.Leaks(string(raw), key); len(leaks) > 0 {
		t.Errorf("the exported data holds the credential:\n%s", strings.Join(leaks, "\n"))
	}
	if strings.Contains(string(raw), egress.PlaceholderPrefix) {
		t.Errorf("the exported data holds a broker placeholder")
	}
}
