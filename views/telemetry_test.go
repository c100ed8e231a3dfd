package views

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kewplan/kewplan/runners"
)

func TestWriteTelemetry(t *testing.T) {
	half := 0.5
	one := int64(1)
	tests := []struct {
		name string
		t    runners.RunTotals
		want string
	}{
		{
			name: "finished run with cost",
			t: runners.RunTotals{Model: "claude-sonnet-4-5", ModelSource: runners.ModelReported, SessionID: "s",
				InputTokens: 1234567, OutputTokens: 1, CacheReadTokens: 4000, CostUSD: &half, Turns: &one,
				Finished: true, Events: 1, UnparsedLines: 2, OversizedLines: 3},
			want: `Runner       claude-code
Model        claude-sonnet-4-5 (reported)
Session      s
Status       ok
Finished     yes
Turns        1
Input        1,234,567 tokens
Output       1 token
Cache read   4,000 tokens
Cache write  0 tokens
Cost         $0.50
Lines        1 event, 2 unparsed, 3 oversized
`,
		},
		{
			name: "routed model, unknown cost, hostile strings",
			t: runners.RunTotals{Model: "a\x1b]52;c;Zm9v\x07b", ModelSource: runners.ModelRouted, SessionID: "x\ny",
				IsError: true},
			want: `Runner       claude-code
Model        a\x1b]52;c;Zm9v\x07b (routed; the stream names no model)
Session      x\ny
Status       error
Finished     no terminal event; figures are as of the last line
Turns        -
Input        0 tokens
Output       0 tokens
Cache read   0 tokens
Cache write  0 tokens
Cost         unknown (the agent reported no cost)
Lines        0 events, 0 unparsed, 0 oversized
`,
		},
		{
			name: "no model at all",
			t:    runners.RunTotals{},
			want: "Model        unknown (the stream names none and no model was routed)\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := writeTelemetry(&b, "claude-code", tt.t); err != nil {
				t.Fatal(err)
			}
			got := b.String()
			if !strings.HasPrefix(tt.want, "Runner") { // a single line to find
				for _, l := range strings.SplitAfter(got, "\n") {
					if strings.HasPrefix(l, "Model") {
						got = l
					}
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("WriteTelemetry mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWriteTelemetryJSON(t *testing.T) {
	var b bytes.Buffer
	if err := writeTelemetryJSON(&b, runners.RunTotals{Model: "m\x1b", ModelSource: runners.ModelReported}); err != nil {
		t.Fatal(err)
	}
	want := `{
  "model": "m\u001b",
  "model_source": "reported",
  "session_id": "",
  "input_tokens": 0,
  "output_tokens": 0,
  "cache_read_tokens": 0,
  "cache_write_tokens": 0,
  "cost_usd": null,
  "is_error": false,
  "turns": null,
  "finished": false,
  "events": 0,
  "unparsed_lines": 0,
  "oversized_lines": 0
}
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("WriteTelemetryJSON mismatch (-want +got):\n%s", diff)
	}
}
