package runners

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestClassifyAPIError(t *testing.T) {
	tests := []struct {
		status int
		texts  []string
		want   string
	}{
		{529, nil, "HTTP 529 overloaded"},
		{429, nil, "HTTP 429 rate limited"},
		{503, nil, "HTTP 503 server error"},
		{500, []string{"whatever"}, "HTTP 500 server error"},
		{408, nil, "HTTP 408 request timeout"},
		{400, []string{"rate limit"}, ""}, // the status decides alone
		{401, nil, ""},
		{404, nil, ""},
		{0, []string{"API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}"}, "HTTP 529 overloaded"},
		{0, []string{"API Error: 400 stub: this request is refused"}, ""},
		{0, []string{"429: {\"message\":\"Rate limit exceeded\"}"}, "HTTP 429 rate limited"},
		{0, []string{"429 status code (no body)"}, "HTTP 429 rate limited"},
		{0, []string{"400: {\"message\":\"overloaded?\"}"}, ""},
		{0, []string{"Error code: 503 - Service Unavailable"}, "HTTP 503 server error"},
		{0, []string{"Error code: 400 - rate limit of the prompt size"}, ""},
		{0, []string{"the agent changed 500 files"}, ""},
		{0, []string{"upstream status 502"}, "HTTP 502 server error"},
		{0, []string{"HTTP/1.1 504 Gateway Timeout"}, "HTTP 504 server error"},
		{0, []string{"Overloaded"}, APIOverloaded},
		{0, []string{"rate_limit_error"}, APIRateLimited},
		{0, []string{"Too Many Requests"}, APIRateLimited},
		{0, []string{"Connection error.: bad port"}, APIUnreachable},
		{0, []string{"Cannot connect to API: Unable to connect."}, APIUnreachable},
		{0, []string{"No API key found for provider openrouter"}, ""},
		{0, []string{"invalid_request_error"}, ""},
		{0, []string{"", "overloaded_error"}, APIOverloaded},
		{0, nil, ""},
	}
	for _, tc := range tests {
		if got := ClassifyAPIError(tc.status, tc.texts...); got != tc.want {
			t.Errorf("ClassifyAPIError(%d, %q) = %q, want %q", tc.status, tc.texts, got, tc.want)
		}
	}
}

// TestAPIErrorFixtures: the captured api-error streams are HTTP 400 refusals, which a retry would repeat, and
// the successful runs carry no API error.
func TestAPIErrorFixtures(t *testing.T) {
	for _, runner := range []string{"claude-code", "opencode", "pi"} {
		for _, scenario := range []string{"text", "tool", "api-error"} {
			file := filepath.Join("testdata", "streams", runner, scenario+".ndjson")
			got := meterFile(t, runner, "m", file)
			if got.APIError != "" {
				t.Errorf("%s: APIError = %q, want none (a 400 is not transient)", file, got.APIError)
			}
			if scenario == "api-error" && !got.IsError {
				t.Errorf("%s: IsError = false", file)
			}
		}
	}
	for _, f := range []string{"cache", "interrupted", "start-failure", "tool"} {
		file := filepath.Join("testdata", "streams", "hermes", f+".ndjson")
		if got := meterFile(t, "hermes", "m", file); got.APIError != "" {
			t.Errorf("%s: APIError = %q, want none", file, got.APIError)
		}
	}
}

func TestAPIErrorLines(t *testing.T) {
	const (
		ccInit     = `{"type":"system","subtype":"init","model":"claude-sonnet-4-5","session_id":"s"}`
		ccSynth529 = `{"type":"assistant","message":{"id":"x","model":"<synthetic>","content":[{"type":"text","text":"API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}"}],"usage":{"input_tokens":0,"output_tokens":0}},"parent_tool_use_id":null,"error":"unknown","is_api_error_message":true,"session_id":"s"}`
		ccRes529   = `{"type":"result","subtype":"success","is_error":true,"terminal_reason":"api_error","api_error_status":529,"api_error_type":"overloaded_error","result":"API Error: 529 Overloaded","total_cost_usd":0,"session_id":"s"}`
	)
	tests := []struct {
		name, runner string
		lines        []string
		want         string
	}{
		{"claude 529 result", "claude-code", []string{ccInit, ccSynth529, ccRes529}, "HTTP 529 overloaded"},
		{"claude 429 in the status", "claude-code", []string{ccInit,
			`{"type":"result","subtype":"success","is_error":true,"terminal_reason":"api_error","api_error_status":429,"result":"API Error: 429 rate_limit_error"}`}, "HTTP 429 rate limited"},
		{"claude 400 in the status, overloaded in the text", "claude-code", []string{ccInit,
			`{"type":"result","subtype":"success","is_error":true,"terminal_reason":"api_error","api_error_status":400,"result":"API Error: 400 overloaded"}`}, ""},
		{"claude old release: text only", "claude-code", []string{ccInit,
			`{"type":"result","subtype":"success","is_error":true,"result":"API Error: 529 {\"type\":\"overloaded_error\"}"}`}, "HTTP 529 overloaded"},
		{"claude connection error, no status", "claude-code", []string{ccInit,
			`{"type":"result","subtype":"success","is_error":true,"terminal_reason":"api_error","api_error_status":null,"result":"API Error: Connection error."}`}, APIUnreachable},
		{"claude max turns is not an API error", "claude-code", []string{ccInit,
			`{"type":"result","subtype":"error_max_turns","is_error":true,"terminal_reason":"max_turns","errors":["API Error: 529 said the model"]}`}, ""},
		{"claude success whose answer quotes an API error", "claude-code", []string{ccInit,
			`{"type":"result","subtype":"success","is_error":false,"terminal_reason":"completed","result":"API Error: 529"}`}, ""},
		{"claude stream cut after a rate-limit line", "claude-code", []string{ccInit,
			`{"type":"assistant","message":{"id":"y","model":"<synthetic>","content":[{"type":"text","text":"API Error: Rate limited"}]},"parent_tool_use_id":null,"error":"rate_limit","is_api_error_message":true}`}, APIRateLimited},
		{"claude recovered: an error, then a real answer, then success", "claude-code", []string{ccInit, ccSynth529,
			`{"type":"assistant","message":{"id":"z","model":"claude-sonnet-4-5","content":[{"type":"text","text":"done"}]},"parent_tool_use_id":null}`,
			`{"type":"result","subtype":"success","is_error":false,"terminal_reason":"completed","result":"done"}`}, ""},

		{"opencode 529", "opencode", []string{
			`{"type":"error","sessionID":"ses","error":{"name":"APIError","data":{"message":"Overloaded","statusCode":529,"isRetryable":true}}}`}, "HTTP 529 overloaded"},
		{"opencode 401", "opencode", []string{
			`{"type":"error","sessionID":"ses","error":{"name":"APIError","data":{"message":"Unauthorized: too many requests","statusCode":401,"isRetryable":false}}}`}, ""},
		{"opencode unreachable", "opencode", []string{
			`{"type":"error","sessionID":"ses","error":{"name":"APIError","data":{"message":"Cannot connect to API: Unable to connect. Is the computer able to access the url?","isRetryable":true,"metadata":{"url":"http://127.0.0.1:9/v1/chat/completions"}}}}`}, APIUnreachable},
		{"opencode retryable without words", "opencode", []string{
			`{"type":"error","sessionID":"ses","error":{"name":"APIError","data":{"message":"boom","isRetryable":true}}}`}, APIUnreachable},
		{"opencode unknown error", "opencode", []string{
			`{"type":"error","sessionID":"ses","error":{"name":"UnknownError","data":{"message":"Model not found: x"}}}`}, ""},

		{"pi 429", "pi", []string{
			`{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"429: {\"message\":\"Rate limit exceeded\"}","usage":{"input":0,"output":0}}}`,
			`{"type":"agent_settled","aborted":false}`}, "HTTP 429 rate limited"},
		{"pi connection error after its own retries", "pi", []string{
			`{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"Connection error.: bad port"}}`,
			`{"type":"auto_retry_end","success":false,"attempt":3,"finalError":"Connection error.: bad port"}`,
			`{"type":"agent_settled","aborted":false}`}, APIUnreachable},
		{"pi recovered by its own retry", "pi", []string{
			`{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"529 overloaded"}}`,
			`{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"ok"}],"stopReason":"stop"}}`,
			`{"type":"agent_settled","aborted":false}`}, ""},
		{"pi aborted", "pi", []string{
			`{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"529 overloaded"}}`,
			`{"type":"agent_settled","aborted":true}`}, ""},
		{"pi length is not an API error", "pi", []string{
			`{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"length","errorMessage":"529"}}`}, ""},
		{"lemonade server down", "lemonade", []string{
			`{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"503 status code (no body)"}}`}, "HTTP 503 server error"},

		{"hermes overloaded", "hermes", []string{
			`{"type":"result","session_id":"h","exit_code":1,"text":"","tokens":{"input":0,"output":0},"error":"Error code: 529 - {'type': 'error', 'error': {'type': 'overloaded_error'}}"}`}, "HTTP 529 overloaded"},
		{"hermes rate limited", "hermes", []string{
			`{"type":"result","session_id":"h","exit_code":1,"error":"RateLimitError: 429 Too Many Requests"}`}, "HTTP 429 rate limited"},
		{"hermes interrupted", "hermes", []string{
			`{"type":"result","session_id":"h","exit_code":130,"error":"interrupted: overloaded"}`}, ""},
		{"hermes success", "hermes", []string{
			`{"type":"result","session_id":"h","exit_code":0,"text":"rate limit handled"}`}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, ok := Builtin(tc.runner)
			if !ok {
				t.Fatalf("no runner %q", tc.runner)
			}
			m := r.NewMeter("m")
			var sb strings.Builder
			for _, l := range tc.lines {
				sb.WriteString(l + "\n")
			}
			if err := Feed(strings.NewReader(sb.String()), m, nil); err != nil {
				t.Fatal(err)
			}
			got := m.Totals()
			if got.APIError != tc.want {
				t.Errorf("APIError = %q, want %q (totals %+v)", got.APIError, tc.want, got)
			}
			if tc.want != "" && !got.IsError {
				t.Error("an API error on a run that is not an error")
			}
		})
	}
}
