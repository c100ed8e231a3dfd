package verdict

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzDecodeVerdict checks the verdict parser's promises on any input: it never panics; whatever it accepts has
// exactly one, exactly spelled occurrence of each key in every object and nothing after the object (checked
// independently with encoding/json's token stream); the accepted values are the ones encoding/json reads too (so
// no ambiguity decided the verdict); and the recorded digest is sha256 of the input. Seeds live in
// testdata/fuzz/FuzzDecodeVerdict and replay in every `go test`; `go test -fuzz FuzzDecodeVerdict` explores.
func FuzzDecodeVerdict(f *testing.F) {
	f.Add([]byte(`{"verdict":"approve","summary":"ok"}`))
	f.Add([]byte(`{"verdict":"reject","VERDICT":"approve","summary":"s"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := decodeVerdict(data)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("error %T %v, want *SyntaxError", err, err)
			}
			if se.Offset < 0 || se.Offset > len(data) {
				t.Fatalf("error offset %d outside the %d-byte input", se.Offset, len(data))
			}
			return
		}
		sum := sha256.Sum256(data)
		if v.SHA256 != hex.EncodeToString(sum[:]) {
			t.Fatalf("SHA256 = %s, want sha256 of the input %x", v.SHA256, sum)
		}
		switch v.Verdict {
		case Approve, RequestChanges, Reject:
		default:
			t.Fatalf("accepted verdict %q", v.Verdict)
		}
		if err := checkSingleExactKeys(data); err != nil {
			t.Fatalf("accepted %q but %v", data, err)
		}
		var std struct {
			Verdict  string    `json:"verdict"`
			Summary  string    `json:"summary"`
			Findings []Finding `json:"findings"`
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&std); err != nil {
			t.Fatalf("accepted %q but encoding/json refuses it: %v", data, err)
		}
		if std.Findings == nil {
			std.Findings = []Finding{}
		}
		got := Verdict{Verdict: v.Verdict, Summary: v.Summary, Findings: v.Findings}
		want := Verdict{Verdict: std.Verdict, Summary: std.Summary, Findings: std.Findings}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("decodeVerdict disagrees with encoding/json on %q (-want +got):\n%s", data, diff)
		}
	})
}

// checkSingleExactKeys walks data's JSON tokens and fails on a duplicate key, a key outside the schema (including
// a case variant), or a second top-level value.
func checkSingleExactKeys(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	type frame struct {
		object bool
		keys   map[string]bool
		allow  map[string]bool
		expect bool // the next string token in this object is a key
	}
	top := map[string]bool{"verdict": true, "summary": true, "findings": true}
	finding := map[string]bool{"path": true, "line": true, "message": true}
	var stack []*frame
	values := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if len(stack) == 0 {
			values++
			if values > 1 {
				return errors.New("a second top-level value")
			}
		}
		var cur *frame
		if len(stack) > 0 {
			cur = stack[len(stack)-1]
		}
		if cur != nil && cur.object && cur.expect {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				continue
			}
			key := tok.(string)
			if !cur.allow[key] {
				return errors.New("key " + key + " outside the schema")
			}
			if cur.keys[key] {
				return errors.New("duplicate key " + key)
			}
			cur.keys[key] = true
			cur.expect = false
			continue
		}
		if cur != nil && cur.object {
			cur.expect = true
		}
		switch d, _ := tok.(json.Delim); d {
		case '{':
			allow := top
			if len(stack) > 0 {
				allow = finding
			}
			stack = append(stack, &frame{object: true, keys: map[string]bool{}, allow: allow, expect: true})
		case '[':
			stack = append(stack, &frame{})
		case ']':
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].object {
				stack[len(stack)-1].expect = true
			}
		}
	}
	if strings.TrimSpace(string(data)) == "" {
		return errors.New("empty input")
	}
	return nil
}
