package transcript

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kewplan/kewplan/internal/redact"
	"github.com/kewplan/kewplan/internal/testtools/redacttest"
)

// readerViews are what `kewplan logs` shows of an event: the --json line and each decoded string the human view
// prints.
func readerViews(t *testing.T, e Event) []string {
	t.Helper()
	j, err := json.Marshal(e)
	if err != nil {
		t.Fatalf("event does not encode: %v", err)
	}
	return []string{string(j), e.Text, e.Summary, e.Output, e.Message, e.Excerpt, string(e.Input)}
}

func assertHidden(t *testing.T, how string, evs []Event) {
	t.Helper()
	for _, e := range evs {
		for _, v := range readerViews(t, e) {
			if leaks := redacttest.Leaks(v, redacttest.Key); len(leaks) > 0 {
				t.Errorf("%s: event %d (%s) shows the key: %s", how, e.Seq, e.Kind, strings.Join(leaks, "\n"))
			}
		}
	}
}

func scanAll(t *testing.T, protocol, stdout, stderr string, m *redact.Masker) []Event {
	t.Helper()
	p, _ := New("n", protocol, "")
	p.Mask(m)
	var evs []Event
	collect := func(e Event) error { evs = append(evs, e); return nil }
	if err := Scan(strings.NewReader(stdout), p, collect); err != nil {
		t.Fatal(err)
	}
	if err := ScanStderr(strings.NewReader(stderr), p, collect); err != nil {
		t.Fatal(err)
	}
	return evs
}

// stored is what apply stores of a stream: the bytes through the masking writer.
func stored(m *redact.Masker, s string) string {
	var b bytes.Buffer
	w := m.Writer(&b)
	w.Write([]byte(s))
	w.Flush()
	return b.String()
}

// TestTranscriptNeverShowsTheKey reads every common encoding of a key as `kewplan logs` does, human and
// --json: from the log apply stored (masked as written), and from a stream recorded without masking read with
// the node's masker. No decoded string of any event holds the key in any decoded form.
func TestTranscriptNeverShowsTheKey(t *testing.T) {
	m := redact.New(redacttest.Key)
	for _, c := range redacttest.Cases(redacttest.Key) {
		t.Run(c.Name, func(t *testing.T) {
			out, errs := c.Stdout+"\n", c.Stderr+"\n"
			if c.Stderr == "" {
				errs = ""
			}
			if evs := scanAll(t, "claude-code", out, errs, nil); !showsKey(t, evs) {
				t.Fatalf("the unmasked stream's transcript does not show the key: the case tests nothing")
			}
			assertHidden(t, "stored log", scanAll(t, "claude-code", stored(m, out), stored(m, errs), nil))
			assertHidden(t, "recorded stream read with the masker", scanAll(t, "claude-code", out, errs, m))
		})
	}
}

// TestHermesDeltasJoinedAreMasked: Hermes streams text in deltas, which the transcript joins into one event, so
// a key split across two delta lines is whole in what `logs` shows.
func TestHermesDeltasJoinedAreMasked(t *testing.T) {
	k := redacttest.Key
	var in strings.Builder
	for _, part := range []string{"the key is " + k[:30], k[30:] + " (do not share)"} {
		b, _ := json.Marshal(map[string]string{"type": "text", "text": part})
		in.Write(append(b, '\n'))
	}
	m := redact.New(k)
	if evs := scanAll(t, "hermes", in.String(), "", nil); !showsKey(t, evs) {
		t.Fatal("the joined deltas do not show the key: the case tests nothing")
	}
	assertHidden(t, "recorded stream read with the masker", scanAll(t, "hermes", in.String(), "", m))
	assertHidden(t, "stored log", scanAll(t, "hermes", stored(m, in.String()), "", nil))
}

// TestMaskKeepsInputJSON: a tool call's input stays JSON when a secret in it is masked.
func TestMaskKeepsInputJSON(t *testing.T) {
	line := `{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"curl -H 'x-api-key: \u0073` +
		redacttest.Key[1:] + `' https://api.anthropic.com"}}]}}` + "\n"
	evs := scanAll(t, "claude-code", line, "", redact.New(redacttest.Key))
	assertHidden(t, "tool input", evs)
	for _, e := range evs {
		if e.Kind == KindToolCall && !json.Valid(e.Input) {
			t.Errorf("input is not JSON: %s", e.Input)
		}
	}
}

func showsKey(t *testing.T, evs []Event) bool {
	for _, e := range evs {
		for _, v := range readerViews(t, e) {
			if len(redacttest.Leaks(v, redacttest.Key)) > 0 {
				return true
			}
		}
	}
	return false
}
