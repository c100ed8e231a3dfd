package runners

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func cost(c float64) *float64 { return &c }
func turns(n int64) *int64    { return &n }

// meterFile feeds a stream file through a fresh meter of runner and returns the final totals.
func meterFile(t *testing.T, runner, routed, path string) RunTotals {
	t.Helper()
	r, ok := Builtin(runner)
	if !ok {
		t.Fatalf("Builtin(%q) not found", runner)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := r.NewMeter(routed)
	var log bytes.Buffer
	if err := Feed(f, m, &log); err != nil {
		t.Fatalf("Feed(%s): %v", path, err)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(log.Bytes(), want) {
		t.Errorf("Feed(%s) log is not a verbatim copy of the stream", path)
	}
	return m.Totals()
}

// TestFixtures reproduces the expected totals of every captured stream in testdata/streams/README.md (and the
// constructed hermes streams in testdata/streams/hermes/README.md), error runs included.
//
// One deliberate difference from the captures' README: opencode/api-error lists cost_usd as "0 (no cost in the
// stream)". RunTotals reports a cost the agent did not report as null, never as a made-up 0, so the
// expectation here is nil.
func TestFixtures(t *testing.T) {
	const (
		ccText  = "f662ef83-dd81-452d-87a3-03b10faff7df"
		ccTool  = "b2658d1c-6bfa-4e0f-a886-b4559cdbebb5"
		ccError = "48a8a0c1-b26a-4251-8c8c-5fd5ec74e0d4"
	)
	tests := []struct {
		runner, file, routed string
		want                 RunTotals
	}{
		{"claude-code", "claude-code/text.ndjson", "routed-model", RunTotals{
			Model: "claude-sonnet-4-5", ModelSource: ModelReported, SessionID: ccText,
			InputTokens: 120, OutputTokens: 25, CacheReadTokens: 4000, CacheWriteTokens: 300,
			CostUSD: cost(0.00306), Turns: turns(1), Finished: true, Events: 3,
		}},
		{"claude-code", "claude-code/tool.ndjson", "routed-model", RunTotals{
			Model: "claude-sonnet-4-5", ModelSource: ModelReported, SessionID: ccTool,
			InputTokens: 210, OutputTokens: 58, CacheReadTokens: 10600, CacheWriteTokens: 690,
			CostUSD: cost(0.0072675), Turns: turns(2), Finished: true, Events: 6,
		}},
		{"claude-code", "claude-code/api-error.ndjson", "routed-model", RunTotals{
			Model: "claude-sonnet-4-5", ModelSource: ModelReported, SessionID: ccError,
			CostUSD: cost(0), IsError: true, Turns: turns(1), Finished: true, Events: 3,
		}},
		{"opencode", "opencode/text.ndjson", "stub/stub-model", RunTotals{
			Model: "stub/stub-model", ModelSource: ModelRouted, SessionID: "ses_dd428fae0ffeU83Bp3jN5Wdfj2",
			InputTokens: 420, OutputTokens: 25, CacheReadTokens: 4000, CacheWriteTokens: 0,
			CostUSD: cost(0.00304), Events: 3,
		}},
		{"opencode", "opencode/tool.ndjson", "stub/stub-model", RunTotals{
			Model: "stub/stub-model", ModelSource: ModelRouted, SessionID: "ses_dd428dc9affeD8iZcRk4xvoA7S",
			InputTokens: 900, OutputTokens: 58, CacheReadTokens: 10600, CacheWriteTokens: 0,
			CostUSD: cost(0.007564), Events: 7,
		}},
		{"opencode", "opencode/api-error.ndjson", "stub/stub-model", RunTotals{
			Model: "stub/stub-model", ModelSource: ModelRouted, SessionID: "ses_dd428bb82ffevGf67Won63LD72",
			CostUSD: nil, IsError: true, Events: 1,
		}},
		{"pi", "pi/text.ndjson", "routed-model", RunTotals{
			Model: "stub-model", ModelSource: ModelReported, SessionID: "01a22bd7-7b1d-77c4-ba59-1e64e277b6cc",
			InputTokens: 120, OutputTokens: 25, CacheReadTokens: 4000, CacheWriteTokens: 300,
			CostUSD: cost(0.00319), Turns: turns(1), Finished: true, Events: 17,
		}},
		{"pi", "pi/tool.ndjson", "routed-model", RunTotals{
			Model: "stub-model", ModelSource: ModelReported, SessionID: "01a22bd7-81fa-73d1-82c3-66b9a55f2e5d",
			InputTokens: 210, OutputTokens: 58, CacheReadTokens: 10600, CacheWriteTokens: 690,
			CostUSD: cost(0.007909), Turns: turns(2), Finished: true, Events: 37,
		}},
		{"pi", "pi/api-error.ndjson", "routed-model", RunTotals{
			Model: "stub-model", ModelSource: ModelReported, SessionID: "01a22bd7-88ab-76b2-9f68-ca21391159f1",
			CostUSD: cost(0), IsError: true, Turns: turns(1), Finished: true, Events: 12,
		}},
		// lemonade is pi's vocabulary with the cost forced to 0.
		{"lemonade", "pi/tool.ndjson", "Qwen3.5-35B-A3B-GGUF", RunTotals{
			Model: "stub-model", ModelSource: ModelReported, SessionID: "01a22bd7-81fa-73d1-82c3-66b9a55f2e5d",
			InputTokens: 210, OutputTokens: 58, CacheReadTokens: 10600, CacheWriteTokens: 690,
			CostUSD: cost(0), Turns: turns(2), Finished: true, Events: 37,
		}},
		{"hermes", "hermes/tool.ndjson", "routed-model", RunTotals{
			Model: "anthropic/claude-sonnet-4", ModelSource: ModelReported, SessionID: "20260418_101530_ab12cd",
			InputTokens: 5000, OutputTokens: 200, Finished: true, Events: 5,
		}},
		{"hermes", "hermes/cache.ndjson", "routed-model", RunTotals{
			Model: "anthropic/claude-sonnet-4", ModelSource: ModelReported, SessionID: "20260420_211037_de8721",
			InputTokens: 1200, OutputTokens: 340, CacheReadTokens: 12000, CacheWriteTokens: 1800,
			Finished: true, Events: 6,
		}},
		{"hermes", "hermes/interrupted.ndjson", "routed-model", RunTotals{
			Model: "anthropic/claude-sonnet-4", ModelSource: ModelReported, SessionID: "20260421_080000_0a0b0c",
			InputTokens: 800, OutputTokens: 12, IsError: true, Finished: true, Events: 3,
		}},
		{"hermes", "hermes/start-failure.ndjson", "routed-model", RunTotals{
			Model: "anthropic/claude-sonnet-4", ModelSource: ModelReported, SessionID: "20260422_120000_ffeedd",
			IsError: true, Finished: true, Events: 2,
		}},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		seen[tt.file] = true
		t.Run(tt.runner+"/"+tt.file, func(t *testing.T) {
			got := meterFile(t, tt.runner, tt.routed, filepath.Join("testdata", "streams", tt.file))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("totals mismatch (-want +got):\n%s", diff)
			}
		})
	}
	// Every stream in testdata has an expectation.
	files, err := filepath.Glob(filepath.Join("testdata", "streams", "*", "*.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		rel := filepath.ToSlash(strings.TrimPrefix(f, filepath.Join("testdata", "streams")+string(filepath.Separator)))
		if !seen[rel] {
			t.Errorf("%s has no expected totals in TestFixtures", rel)
		}
	}
}

// TestLiveFigures checks that Totals is honest mid-run: deduplicated by message id, never summing the repeats.
func TestLiveFigures(t *testing.T) {
	tests := []struct {
		runner, file string
		lines        int // how many lines to feed
		want         RunTotals
	}{
		// Before the result: msg_stub_tool_01 arrives twice and is counted once; output is the placeholder
		// (a lower bound) and the cost is unknown.
		{"claude-code", "claude-code/tool.ndjson", 5, RunTotals{
			Model: "claude-sonnet-4-5", ModelSource: ModelReported, SessionID: "b2658d1c-6bfa-4e0f-a886-b4559cdbebb5",
			InputTokens: 210, OutputTokens: 2, CacheReadTokens: 10600, CacheWriteTokens: 690, Events: 5,
		}},
		// The synthetic API-error line already marks the run failed.
		{"claude-code", "claude-code/api-error.ndjson", 2, RunTotals{
			Model: "claude-sonnet-4-5", ModelSource: ModelReported, SessionID: "48a8a0c1-b26a-4251-8c8c-5fd5ec74e0d4",
			IsError: true, Events: 2,
		}},
		// pi after the first model call (line 19 is its message_end): the ten message_update snapshots
		// before it are not summed.
		{"pi", "pi/tool.ndjson", 19, RunTotals{
			Model: "stub-model", ModelSource: ModelReported, SessionID: "01a22bd7-81fa-73d1-82c3-66b9a55f2e5d",
			InputTokens: 150, OutputTokens: 40, CacheReadTokens: 5000, CacheWriteTokens: 600,
			CostUSD: cost(0.00462), Events: 19,
		}},
		// pi's agent_end (line 36) repeats every message; before agent_settled the run is not finished.
		{"pi", "pi/tool.ndjson", 36, RunTotals{
			Model: "stub-model", ModelSource: ModelReported, SessionID: "01a22bd7-81fa-73d1-82c3-66b9a55f2e5d",
			InputTokens: 210, OutputTokens: 58, CacheReadTokens: 10600, CacheWriteTokens: 690,
			CostUSD: cost(0.007909), Turns: turns(2), Events: 36,
		}},
		{"opencode", "opencode/tool.ndjson", 4, RunTotals{
			Model: "m", ModelSource: ModelRouted, SessionID: "ses_dd428dc9affeD8iZcRk4xvoA7S",
			InputTokens: 750, OutputTokens: 40, CacheReadTokens: 5000, CostUSD: cost(0.00432), Events: 4,
		}},
		{"hermes", "hermes/tool.ndjson", 4, RunTotals{
			Model: "anthropic/claude-sonnet-4", ModelSource: ModelReported, SessionID: "20260418_101530_ab12cd",
			Events: 4,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "streams", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			r, _ := Builtin(tt.runner)
			m := r.NewMeter("m")
			for _, line := range strings.SplitN(string(data), "\n", tt.lines+1)[:tt.lines] {
				m.Line([]byte(line))
			}
			if diff := cmp.Diff(tt.want, m.Totals()); diff != "" {
				t.Errorf("live totals mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMeterEdgeCases covers what the captures do not: unknown types and fields, non-JSON lines, CRLF, escapes,
// hostile numbers, and the claude-code result overriding live figures.
func TestMeterEdgeCases(t *testing.T) {
	tests := []struct {
		name, protocol string
		lines          []string
		want           RunTotals
	}{
		{
			name:     "non-JSON and non-object lines are unparsed, never fatal",
			protocol: "claude-code",
			lines: []string{
				"[SandboxDebug] starting", "", "[1,2]", `"text"`, `{"type":"assistant"`, `{"type":"x"} trailing`,
				`{"type":"system","subtype":"init","model":"claude-opus-4","session_id":"s1"}`,
			},
			want: RunTotals{Model: "claude-opus-4", ModelSource: ModelReported, SessionID: "s1", Events: 1, UnparsedLines: 6},
		},
		{
			name:     "unknown event types and fields are tolerated; CRLF lines parse",
			protocol: "claude-code",
			lines: []string{
				"{\"type\":\"system\",\"subtype\":\"init\",\"model\":\"m1\",\"session_id\":\"s\",\"new\":{\"deep\":[1,{}]}}\r",
				`{"type":"rate_limit_event","rate_limit_info":{"status":"allowed"}}`,
				`{"type":"brand_new","usage":{"input_tokens":999}}`,
				`{"type":"assistant","message":{"id":"a","model":"m1","usage":{"input_tokens":5,"output_tokens":1,"future":7}}}`,
			},
			want: RunTotals{Model: "m1", ModelSource: ModelReported, SessionID: "s", InputTokens: 5, OutputTokens: 1, Events: 4},
		},
		{
			name:     "escaped keys and values decode",
			protocol: "claude-code",
			lines: []string{
				`{"typ\u0065":"syst\u0065m","subtype":"init","model":"m\u00e9","session_id":"s\"1"}`,
			},
			want: RunTotals{Model: "mé", ModelSource: ModelReported, SessionID: `s"1`, Events: 1},
		},
		{
			name:     "claude result overwrites live figures, and is_error beats subtype",
			protocol: "claude-code",
			lines: []string{
				`{"type":"assistant","message":{"id":"a","model":"m","usage":{"input_tokens":100,"output_tokens":1}}}`,
				`{"type":"assistant","message":{"id":"b","model":"m","usage":{"input_tokens":100,"output_tokens":1}}}`,
				`{"type":"result","subtype":"error_max_turns","is_error":false,"usage":{"input_tokens":7,"output_tokens":9},"total_cost_usd":0.5,"num_turns":3,"session_id":"r"}`,
			},
			want: RunTotals{Model: "m", ModelSource: ModelReported, SessionID: "r", InputTokens: 7, OutputTokens: 9,
				CostUSD: cost(0.5), Turns: turns(3), Finished: true, Events: 3},
		},
		{
			name:     "subagent assistant lines count but do not name the model",
			protocol: "claude-code",
			lines: []string{
				`{"type":"assistant","parent_tool_use_id":null,"message":{"id":"a","model":"claude-opus-4","usage":{"input_tokens":10}}}`,
				`{"type":"assistant","parent_tool_use_id":"toolu_1","message":{"id":"b","model":"claude-haiku-4","usage":{"input_tokens":3}}}`,
			},
			want: RunTotals{Model: "claude-opus-4", ModelSource: ModelReported, InputTokens: 13, Events: 2},
		},
		{
			name:     "a result without a model anywhere takes the costliest modelUsage key",
			protocol: "claude-code",
			lines: []string{
				`{"type":"result","is_error":false,"usage":{},"total_cost_usd":1,"modelUsage":{"small":{"costUSD":0.1},"big":{"costUSD":0.9}}}`,
			},
			want: RunTotals{Model: "big", ModelSource: ModelReported, CostUSD: cost(1), Finished: true, Events: 1},
		},
		{
			name:     "hostile numbers are ignored, sums saturate",
			protocol: "opencode",
			lines: []string{
				`{"type":"step_finish","part":{"tokens":{"input":-5,"output":1.5,"cache":{"read":"7"}},"cost":-1}}`,
				`{"type":"step_finish","part":{"tokens":{"input":9223372036854775807,"output":2e2}}}`,
				`{"type":"step_finish","part":{"tokens":{"input":9223372036854775807,"reasoning":3},"cost":1e400}}`,
			},
			want: RunTotals{Model: "m", ModelSource: ModelRouted, InputTokens: 9223372036854775807, OutputTokens: 203, Events: 3},
		},
		{
			name:     "opencode done is its terminal event (newer releases)",
			protocol: "opencode",
			lines:    []string{`{"type":"done","reason":"idle","rejected":[]}`},
			want:     RunTotals{Model: "m", ModelSource: ModelRouted, Finished: true, Events: 1},
		},
		{
			name:     "pi: only assistant message_end counts; a later success clears an earlier retried error",
			protocol: "pi",
			lines: []string{
				`{"type":"message_end","message":{"role":"assistant","model":"x","stopReason":"error","usage":{"input":0,"cost":{"total":0}}}}`,
				`{"type":"auto_retry_start","attempt":1}`,
				`{"type":"message_update","usage":{"input":50,"cost":{"total":9}}}`,
				`{"type":"message_end","message":{"role":"assistant","model":"x","stopReason":"stop","usage":{"input":50,"cost":{"total":0.25}}}}`,
				`{"type":"turn_end","message":{"role":"assistant","usage":{"input":50,"cost":{"total":0.25}}}}`,
				`{"type":"message_end","message":{"role":"toolResult","usage":{"input":4,"output":2,"cost":{"total":0.01}}}}`,
				`{"type":"message_end","message":{"role":"user","usage":{"input":1000}}}`,
				`{"type":"agent_settled","aborted":false}`,
			},
			want: RunTotals{Model: "x", ModelSource: ModelReported, InputTokens: 54, OutputTokens: 2, CostUSD: cost(0.26),
				Turns: turns(1), Finished: true, Events: 8},
		},
		{
			name:     "pi: an aborted settle is a failure",
			protocol: "pi",
			lines:    []string{`{"type":"agent_settled","aborted":true}`},
			want:     RunTotals{Model: "m", ModelSource: ModelRouted, IsError: true, Finished: true, Events: 1},
		},
		{
			name:     "hermes: no result means no figures and no cost",
			protocol: "hermes",
			lines:    []string{`{"type":"system","subtype":"init","model":"x/y","session_id":"h"}`, `{"type":"text","text":"hi"}`},
			want:     RunTotals{Model: "x/y", ModelSource: ModelReported, SessionID: "h", Events: 2},
		},
		{
			name:     "an overlong model name is truncated",
			protocol: "hermes",
			lines:    []string{`{"type":"system","subtype":"init","model":"` + strings.Repeat("é", 400) + `"}`},
			want:     RunTotals{Model: strings.Repeat("é", 256), ModelSource: ModelReported, Events: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, ok := NewMeter(tt.protocol, "m")
			if !ok {
				t.Fatalf("NewMeter(%q) unknown", tt.protocol)
			}
			for _, l := range tt.lines {
				m.Line([]byte(l))
			}
			if diff := cmp.Diff(tt.want, m.Totals()); diff != "" {
				t.Errorf("totals mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
