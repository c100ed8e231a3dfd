package transcript

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kewplan/kewplan/internal/testtools/golden"
	"github.com/kewplan/kewplan/runners"
)

func streams(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("testdata/streams/*/*.ndjson")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixture streams: %v", err)
	}
	return files
}

func transcribe(t *testing.T, protocol string, in []byte) []Event {
	t.Helper()
	p, ok := New("n", protocol, "")
	if !ok {
		t.Fatalf("New(%q) refused", protocol)
	}
	var evs []Event
	if err := Scan(bytes.NewReader(in), p, func(e Event) error { evs = append(evs, e); return nil }); err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestGolden renders every fixture stream as JSON lines, the --json form, against testdata/golden.
func TestGolden(t *testing.T) {
	for _, file := range streams(t) {
		protocol := filepath.Base(filepath.Dir(file))
		name := protocol + "-" + strings.TrimSuffix(filepath.Base(file), ".ndjson")
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			enc := json.NewEncoder(&got)
			enc.SetEscapeHTML(false)
			for _, e := range transcribe(t, protocol, in) {
				if err := enc.Encode(e); err != nil {
					t.Fatal(err)
				}
			}
			golden.Check(t, filepath.Join("testdata", "golden", name+".jsonl"), got.Bytes())
		})
	}
}

// step is the part of an event the order test looks at.
type step struct {
	Kind Kind
	What string
}

func steps(evs []Event) []step {
	var out []step
	for _, e := range evs {
		switch e.Kind {
		case KindText:
			out = append(out, step{e.Kind, e.Text})
		case KindToolCall:
			out = append(out, step{e.Kind, e.Summary})
		case KindToolResult:
			out = append(out, step{e.Kind, strings.TrimSpace(e.Output)})
		case KindResult:
			out = append(out, step{e.Kind, e.Text})
		}
	}
	return out
}

// TestToolRunInOrder is the "done when": on the real captures, the assistant's text, the bash call with
// its command, its result and the final answer, in that order, for every vocabulary.
func TestToolRunInOrder(t *testing.T) {
	want := []step{
		{KindText, "I'll run the command."},
		{KindToolCall, "bash: echo hi"},
		{KindToolResult, "hi"},
		{KindText, "The command printed: hi"},
		{KindResult, "The command printed: hi"},
	}
	for _, protocol := range []string{"claude-code", "opencode", "pi"} {
		in, err := os.ReadFile(filepath.Join("testdata/streams", protocol, "tool.ndjson"))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, steps(transcribe(t, protocol, in))); diff != "" {
			t.Errorf("%s: transcript mismatch (-want +got):\n%s", protocol, diff)
		}
	}
}

// TestUsageOncePerCall: Claude Code repeats a response's usage on each content block; pi repeats it in
// message_update, turn_end and agent_end. Each model call is one usage event, and the result agrees with the
// meter.
func TestUsageOncePerCall(t *testing.T) {
	for _, protocol := range []string{"claude-code", "opencode", "pi"} {
		in, _ := os.ReadFile(filepath.Join("testdata/streams", protocol, "tool.ndjson"))
		evs := transcribe(t, protocol, in)
		var calls, sumIn int64
		var result *Event
		for i, e := range evs {
			switch e.Kind {
			case KindUsage:
				calls++
				sumIn += *e.InputTokens
			case KindResult:
				result = &evs[i]
			}
		}
		if calls != 2 {
			t.Errorf("%s: %d usage events, want 2 (two model calls)", protocol, calls)
		}
		if result == nil || result.InputTokens == nil || *result.InputTokens != sumIn {
			t.Errorf("%s: result input tokens do not equal the sum of the calls' (%d): %+v", protocol, sumIn, result)
		}
		m, _ := runners.NewMeter(protocol, "")
		runners.Feed(bytes.NewReader(in), m, nil)
		if tot := m.Totals(); *result.OutputTokens != tot.OutputTokens || *result.CostUSD != *tot.CostUSD {
			t.Errorf("%s: result %d out $%v, telemetry %d out $%v", protocol, *result.OutputTokens, *result.CostUSD, tot.OutputTokens, *tot.CostUSD)
		}
	}
}

// TestJSONLines: every event marshals to one valid JSON object with node, seq and kind, seq counting up.
func TestJSONLines(t *testing.T) {
	for _, file := range streams(t) {
		in, _ := os.ReadFile(file)
		for i, e := range transcribe(t, filepath.Base(filepath.Dir(file)), in) {
			b, err := json.Marshal(e)
			if err != nil || bytes.Contains(b, []byte{'\n'}) {
				t.Fatalf("%s: event %d: %v %q", file, i, err, b)
			}
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatalf("%s: invalid JSON %q: %v", file, b, err)
			}
			if m["kind"] == "" || m["kind"] == nil || m["node"] != "n" || m["seq"] != float64(i+1) {
				t.Errorf("%s: event %d lacks kind, node or seq: %s", file, i, b)
			}
		}
	}
}

// TestGarbageAndHugeLines: garbage, a 10 MB line and a line longer than the meter's limit each become one short
// unparsed event, and the events after them are still read.
func TestGarbageAndHugeLines(t *testing.T) {
	huge := `{"type":"text","part":{"text":"` + strings.Repeat("y", 10<<20) + `"}}`
	beyond := strings.Repeat("z", runners.MaxLineBytes+10)
	in := "garbage \x1b[31m not json\n" + strings.Repeat("x", 10<<20) + "\n" + huge + "\n" + beyond + "\n[1,2]\n" +
		`{"type":"text","part":{"text":"still here"}}` + "\n"
	evs := transcribe(t, "opencode", []byte(in))
	var got []string
	for _, e := range evs {
		switch e.Kind {
		case KindUnparsed:
			if len(e.Excerpt) > ExcerptBytes {
				t.Errorf("excerpt of %d bytes", len(e.Excerpt))
			}
			got = append(got, e.Reason+" "+itoa64(e.Bytes)+" line "+itoa64(e.Line))
		case KindText:
			got = append(got, "text "+e.Text)
		}
	}
	want := []string{
		"not_json 22 line 1",
		"oversized " + itoa64(10<<20) + " line 2",
		"oversized " + itoa64(int64(len(huge))) + " line 3",
		"oversized " + itoa64(int64(len(beyond))) + " line 4",
		"not_json 5 line 5",
		"text still here",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events mismatch (-want +got):\n%s", diff)
	}
}

func itoa64(n int64) string { b, _ := json.Marshal(n); return string(b) }

// TestHermesDeltasCoalesce: Hermes streams text as deltas; the transcript shows one text event per run of them.
func TestHermesDeltasCoalesce(t *testing.T) {
	in, _ := os.ReadFile("testdata/streams/hermes/cache.ndjson")
	got := steps(transcribe(t, "hermes", in))
	want := []step{{KindText, "Looking at it."}, {KindToolCall, "terminal: false"}, {KindToolResult, "exit 1"}, {KindResult, "Done."}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func TestSummarize(t *testing.T) {
	tests := []struct{ tool, input, want string }{
		{"Bash", `{"command":"echo hi","description":"Print hi"}`, "bash: echo hi"},
		{"Edit", `{"file_path":"src/parse.go","old_string":"a","new_string":"b"}`, "edit: src/parse.go"},
		{"edit", `{"path":"src/parse.go","edits":[]}`, "edit: src/parse.go"},
		{"bash", `{"command":"set -e\nmake\nmake test"}`, "bash: set -e (+2 lines)"},
		{"mcp__x", `{"a":1}`, `mcp__x: {"a":1}`},
		{"", `null`, "tool"},
		{"bash", `{"command":"` + strings.Repeat("a", 300) + `"}`, "bash: " + strings.Repeat("a", 153) + "…"},
	}
	for _, tt := range tests {
		if got := Summarize(tt.tool, json.RawMessage(tt.input)); got != tt.want {
			t.Errorf("Summarize(%q, %s) = %q, want %q", tt.tool, tt.input, got, tt.want)
		}
	}
}

func TestUnknownProtocol(t *testing.T) {
	if _, ok := New("n", "codex", ""); ok {
		t.Error("New accepted an unknown protocol")
	}
}

// TestStreamChunks: a stream read in chunks of any size, as a followed log arrives, gives the events Scan gives.
func TestStreamChunks(t *testing.T) {
	for _, file := range streams(t) {
		protocol := filepath.Base(filepath.Dir(file))
		in, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		want := transcribe(t, protocol, in)
		for _, size := range []int{1, 7, 4096} {
			p, _ := New("n", protocol, "")
			s := NewStream(p)
			var got []Event
			emit := func(e Event) error { got = append(got, e); return nil }
			for rest := in; len(rest) > 0; {
				n := min(size, len(rest))
				if err := s.Write(rest[:n], emit); err != nil {
					t.Fatal(err)
				}
				rest = rest[n:]
			}
			if err := s.End(emit); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s in chunks of %d (-Scan +Stream):\n%s", file, size, diff)
			}
		}
	}
}
