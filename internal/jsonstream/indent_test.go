package jsonstream

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestAppendIndentMatchesEncodingJSON: appendIndent gives json.Indent's bytes for what encoding/json marshals,
// on hand-picked edge cases and on every JSON golden file of the repository.
func TestAppendIndentMatchesEncodingJSON(t *testing.T) {
	inputs := []string{
		`{}`, `[]`, `""`, `0`, `null`, `{"a":[]}`, `{"a":{}}`, `[[],[{}],{"":[]}]`,
		`{"k\"ey":"va\\\"l,{}[]:","n":-1.5e+10,"t":true,"f":false,"z":null}`,
		`["\u003c\u0026\u2028","a\\","\\\\",""]`, `{"a":{"b":{"c":[1,[2,[3]]]}}}`,
	}
	var goldens []string
	for _, pattern := range []string{"*/testdata/*.json", "*/testdata/*/*.json", "*/*/testdata/*.json"} {
		m, _ := filepath.Glob(filepath.Join("..", "..", pattern))
		goldens = append(goldens, m...)
	}
	for _, name := range goldens {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if json.Unmarshal(data, &v) != nil {
			continue
		}
		compact, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, string(compact))
	}
	if len(inputs) < 20 {
		t.Fatalf("only %d inputs: the golden files were not found", len(inputs))
	}
	for _, in := range inputs {
		for _, pi := range [][2]string{{"", "  "}, {"    ", "  "}, {">", "\t"}} {
			var want bytes.Buffer
			if err := json.Indent(&want, []byte(in), pi[0], pi[1]); err != nil {
				t.Fatalf("json.Indent(%.60q): %v", in, err)
			}
			if got := appendIndent(nil, []byte(in), pi[0], pi[1]); !bytes.Equal(got, want.Bytes()) {
				t.Errorf("appendIndent(%.60q, %q, %q) =\n%s\nwant\n%s", in, pi[0], pi[1], got, want.Bytes())
			}
		}
	}
}

// FuzzAppendIndent: for any value encoding/json marshals, appendIndent agrees with json.Indent.
func FuzzAppendIndent(f *testing.F) {
	f.Add(`{"a":[1,{"b":"c,d:e"}],"e":{}}`)
	f.Add(`["\"",[],{}]`)
	f.Fuzz(func(t *testing.T, s string) {
		var v any
		if json.Unmarshal([]byte(s), &v) != nil {
			return
		}
		compact, err := json.Marshal(v)
		if err != nil {
			return
		}
		var want bytes.Buffer
		if err := json.Indent(&want, compact, "  ", "  "); err != nil {
			t.Fatal(err)
		}
		if got := appendIndent(nil, compact, "  ", "  "); !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("appendIndent(%q) =\n%s\nwant\n%s", compact, got, want.Bytes())
		}
	})
}
