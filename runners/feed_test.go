package runners

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

// recorder is a Meter that keeps what Feed gave it.
type recorder struct {
	lines     []string
	lens      []int // lengths, for lines too long to keep comfortably
	oversized int
}

func (r *recorder) Line(line []byte) {
	if len(line) <= 1024 {
		r.lines = append(r.lines, string(line))
	} else {
		r.lines = append(r.lines, "<long>")
	}
	r.lens = append(r.lens, len(line))
}
func (r *recorder) Oversized()        { r.oversized++; r.lines = append(r.lines, "<oversized>") }
func (r *recorder) Totals() RunTotals { return RunTotals{} }

func TestFeedSplitsLines(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"empty stream", "", nil},
		{"one line", "a\n", []string{"a"}},
		{"final line without newline is metered", "a\nb", []string{"a", "b"}},
		{"blank lines are lines", "\n\na\n", []string{"", "", "a"}},
		{"CR is left for the meter", "a\r\nb\r\n", []string{"a\r", "b\r"}},
		{"only newline splits: U+2028 stays inside", "{\"t\":\"x\u2028y\"}\n", []string{"{\"t\":\"x\u2028y\"}"}},
	}
	for _, tt := range tests {
		for _, one := range []bool{false, true} {
			name := tt.name
			var r io.Reader = strings.NewReader(tt.in)
			if one {
				name += "/one byte at a time"
				r = iotest.OneByteReader(r)
			}
			t.Run(name, func(t *testing.T) {
				var rec recorder
				var log bytes.Buffer
				if err := Feed(r, &rec, &log); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.want, rec.lines); diff != "" {
					t.Errorf("lines mismatch (-want +got):\n%s", diff)
				}
				if log.String() != tt.in {
					t.Errorf("log = %q, want the stream verbatim %q", log.String(), tt.in)
				}
			})
		}
	}
}

// TestFeedOversized: a line of exactly MaxLineBytes is metered; one byte more is counted and skipped, and the
// lines around it still arrive. The log still receives every byte.
func TestFeedOversized(t *testing.T) {
	max := strings.Repeat("x", MaxLineBytes)
	in := "first\n" + max + "\n" + max + "y\n" + "after\n" + max + "zz" // the last oversized line has no newline
	var rec recorder
	var log countWriter
	if err := Feed(strings.NewReader(in), &rec, &log); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"first", "<long>", "<oversized>", "after", "<oversized>"}, rec.lines); diff != "" {
		t.Errorf("lines mismatch (-want +got):\n%s", diff)
	}
	if rec.lens[1] != MaxLineBytes {
		t.Errorf("max-length line arrived with %d bytes, want %d", rec.lens[1], MaxLineBytes)
	}
	if log.n != int64(len(in)) {
		t.Errorf("log got %d bytes, want %d", log.n, len(in))
	}
}

type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

type failWriter struct{ after int }

func (w *failWriter) Write(p []byte) (int, error) {
	if w.after <= 0 {
		return 0, errors.New("disk full")
	}
	w.after--
	return len(p), nil
}

// TestFeedLogError: a failing log does not stop metering (the agent's pipe must keep draining); the error is
// returned at the end.
func TestFeedLogError(t *testing.T) {
	var rec recorder
	r := iotest.OneByteReader(strings.NewReader("a\nb\nc\n"))
	err := Feed(r, &rec, &failWriter{after: 1})
	if err == nil || err.Error() != "disk full" {
		t.Errorf("Feed error = %v, want disk full", err)
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, rec.lines); diff != "" {
		t.Errorf("lines mismatch (-want +got):\n%s", diff)
	}
}

// TestFeedReadError: the pending partial line is metered, then the read error is returned.
func TestFeedReadError(t *testing.T) {
	var rec recorder
	boom := errors.New("connection reset")
	r := io.MultiReader(strings.NewReader("a\nhalf"), iotest.ErrReader(boom))
	if err := Feed(r, &rec, nil); !errors.Is(err, boom) {
		t.Errorf("Feed error = %v, want %v", err, boom)
	}
	if diff := cmp.Diff([]string{"a", "half"}, rec.lines); diff != "" {
		t.Errorf("lines mismatch (-want +got):\n%s", diff)
	}
}

type stuckReader struct{}

func (stuckReader) Read([]byte) (int, error) { return 0, nil }

// TestFeedNoProgress: a reader that never returns data nor an error does not hang Feed.
func TestFeedNoProgress(t *testing.T) {
	if err := Feed(stuckReader{}, &recorder{}, nil); !errors.Is(err, io.ErrNoProgress) {
		t.Errorf("Feed error = %v, want io.ErrNoProgress", err)
	}
}

// TestFeedMeters runs a real meter through Feed with a noisy stream: counters add up to the lines.
func TestFeedMeters(t *testing.T) {
	in := "[debug] boot\n" +
		`{"type":"system","subtype":"init","model":"m","session_id":"s"}` + "\r\n" +
		strings.Repeat("y", MaxLineBytes+10) + "\n" +
		`{"type":"result","is_error":false,"usage":{"input_tokens":3,"output_tokens":4},"total_cost_usd":0.25}`
	m, _ := NewMeter("claude-code", "")
	if err := Feed(strings.NewReader(in), m, nil); err != nil {
		t.Fatal(err)
	}
	want := RunTotals{Model: "m", ModelSource: ModelReported, SessionID: "s", InputTokens: 3, OutputTokens: 4,
		CostUSD: cost(0.25), Finished: true, Events: 2, UnparsedLines: 1, OversizedLines: 1}
	if diff := cmp.Diff(want, m.Totals()); diff != "" {
		t.Errorf("totals mismatch (-want +got):\n%s", diff)
	}
}
