package runners

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"testing/iotest"
)

// The fuzz targets run their committed seeds (testdata/fuzz/<Target>/) in every `go test`; `go test -fuzz
// FuzzClaudeMeter ./runners` explores further. Seeds are the captured streams and hand-made hostile lines.

// FuzzScan checks the scanner against encoding/json: a line is an event exactly when it is a valid JSON object.
func FuzzScan(f *testing.F) {
	for _, s := range []string{`{}`, ` {"a":[1,2,{"b":null}]} `, `{"a":"\u00e9\n"}`, `{"a":1,}`, `[]`, `{"a":01}`,
		`{"a":-0.5e+3}`, `{"a":"` + "\x01" + `"}`, `{"a":tru}`, strings.Repeat("[", 10001)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got := eachMember(b, func(_, _ []byte) {})
		i := skipWS(b, 0)
		want := json.Valid(b) && i < len(b) && b[i] == '{'
		if got != want {
			t.Fatalf("eachMember(%q) = %v, encoding/json says %v", b, got, want)
		}
		if v := skipValue(b, skipWS(b, 0)); json.Valid(b) != (v >= 0 && skipWS(b, v) == len(b)) {
			t.Fatalf("skipValue(%q) = %d disagrees with json.Valid = %v", b, v, json.Valid(b))
		}
	})
}

// checkMeter feeds a stream through a protocol's meter and checks the invariants every meter keeps.
func checkMeter(t *testing.T, protocol string, stream []byte) {
	m, _ := NewMeter(protocol, "routed")
	var log bytes.Buffer
	if err := Feed(bytes.NewReader(stream), m, &log); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(log.Bytes(), stream) {
		t.Fatal("log is not a verbatim copy")
	}
	got := m.Totals()
	lines := int64(bytes.Count(stream, []byte("\n")))
	if len(stream) > 0 && stream[len(stream)-1] != '\n' {
		lines++
	}
	if n := got.Events + got.UnparsedLines + got.OversizedLines; n != lines {
		t.Fatalf("events %d + unparsed %d + oversized %d = %d, want %d lines",
			got.Events, got.UnparsedLines, got.OversizedLines, n, lines)
	}
	if got.InputTokens < 0 || got.OutputTokens < 0 || got.CacheReadTokens < 0 || got.CacheWriteTokens < 0 {
		t.Fatalf("negative token figure: %+v", got)
	}
	if got.CostUSD != nil && !(*got.CostUSD >= 0) {
		t.Fatalf("cost %v is not a non-negative number", *got.CostUSD)
	}
	if got.Turns != nil && *got.Turns < 0 {
		t.Fatalf("negative turns %d", *got.Turns)
	}
	if len(got.Model) > maxFieldBytes || len(got.SessionID) > maxFieldBytes {
		t.Fatalf("kept an unbounded string: model %d bytes, session %d bytes", len(got.Model), len(got.SessionID))
	}
	if got.Model != "" && got.ModelSource != ModelReported && got.ModelSource != ModelRouted {
		t.Fatalf("model %q with source %q", got.Model, got.ModelSource)
	}
	if _, err := json.Marshal(got); err != nil {
		t.Fatalf("totals do not marshal: %v", err)
	}
	// Totals is a snapshot: asking twice changes nothing.
	if a, b := m.Totals(), m.Totals(); a.Events != b.Events || a.InputTokens != b.InputTokens {
		t.Fatal("Totals is not idempotent")
	}
}

func FuzzClaudeMeter(f *testing.F)   { fuzzMeter(f, "claude-code") }
func FuzzOpencodeMeter(f *testing.F) { fuzzMeter(f, "opencode") }
func FuzzPiMeter(f *testing.F)       { fuzzMeter(f, "pi") }
func FuzzHermesMeter(f *testing.F)   { fuzzMeter(f, "hermes") }
func FuzzLemonadeMeter(f *testing.F) { fuzzMeter(f, "lemonade") }

func fuzzMeter(f *testing.F, protocol string) {
	for _, s := range hostileStreamSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, stream []byte) { checkMeter(t, protocol, stream) })
}

// hostileStreamSeeds are the hostile-input cases as stream lines: deep nesting, terminal control
// sequences and bidi overrides in the fields meters keep (model, session), invalid UTF-8.
var hostileStreamSeeds = []string{
	`{"type":"system","model":` + strings.Repeat("[", 20000) + "\n",
	`{"type":"result","x":` + strings.Repeat(`{"a":`, 600) + `1` + strings.Repeat("}", 600) + "}\n",
	`{"type":"system","subtype":"init","model":"m\u001b[2J\u001b]0;PWNED\u0007","session_id":"\u202eevil"}` + "\n",
	"{\"type\":\"system\",\"model\":\"m\x1b[2J\xe2\x80\xae\"}\n",
	"{\"type\":\"assistant\",\"model\":\"\xff\xfe\"}\n\xff\n",
}

// FuzzFeed checks Feed's framing against a reference split, with a small line limit and chunk so that the
// growth, compaction and oversize paths are all reached: every line of at most maxLine bytes arrives intact,
// every longer one is counted once, and the log is verbatim, whatever the read sizes.
func FuzzFeed(f *testing.F) {
	f.Fuzz(func(t *testing.T, stream []byte, maxLine, chunk uint8, oneByte bool) {
		max, ch := int(maxLine%64)+1, int(chunk%16)+1
		var want []string
		parts := strings.Split(string(stream), "\n")
		if parts[len(parts)-1] == "" {
			parts = parts[:len(parts)-1]
		}
		for _, p := range parts {
			if len(p) > max {
				p = "<oversized>"
			}
			want = append(want, p)
		}
		var rec recorder
		var log bytes.Buffer
		r := iotestReader(stream, oneByte)
		if err := feed(r, &rec, &log, max, ch); err != nil {
			t.Fatal(err)
		}
		if strings.Join(want, "\x00") != strings.Join(rec.lines, "\x00") || len(want) != len(rec.lines) {
			t.Fatalf("feed(max %d, chunk %d) lines %q, want %q", max, ch, rec.lines, want)
		}
		if !bytes.Equal(log.Bytes(), stream) {
			t.Fatal("log is not a verbatim copy")
		}
	})
}

func iotestReader(b []byte, oneByte bool) interface{ Read([]byte) (int, error) } {
	if oneByte {
		return iotest.OneByteReader(bytes.NewReader(b))
	}
	return iotest.HalfReader(bytes.NewReader(b))
}
