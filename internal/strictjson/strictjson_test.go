package strictjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kewplan/kewplan/internal/jsonlimit"
)

type policy struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

type inner struct {
	Inner string `json:"inner"`
}

type saved struct {
	inner
	Policy    *policy                    `json:"policy,omitempty"`
	Variables map[string]json.RawMessage `json:"variables"`
	Targets   []string                   `json:"targets"`
	Untagged  int
	Skipped   int `json:"-"`
	hidden    int
}

type document struct {
	Format string  `json:"format"`
	Saved  *saved  `json:"saved"`
	Nodes  []saved `json:"nodes"`
	Any    any     `json:"any"`
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     *Error // nil: decodes
	}{
		{name: "plain", in: `{"format":"x","saved":{"policy":{"path":"p","sha256":"s"},"variables":{"a":{"b":1}},"targets":[],"inner":"i","Untagged":1},"nodes":[{"targets":["a"]}],"any":{"A":1,"a":2}}`},
		{name: "case-folded policy after the real one", in: "{\"saved\": {\n  \"policy\": {\"path\": \"p\"},\n  \"Policy\": null}}",
			want: &Error{Path: "$.saved.Policy", Line: 3, Column: 3, Err: ErrCaseFolded}},
		{name: "second SAVED object", in: `{"saved":{},"SAVED":{}}`, want: &Error{Path: "$.SAVED", Line: 1, Column: 13, Err: ErrCaseFolded}},
		{name: "duplicate key", in: `{"saved":{},"saved":null}`, want: &Error{Path: "$.saved", Line: 1, Column: 13, Err: ErrDuplicateKey}},
		{name: "duplicate in a map", in: `{"saved":{"variables":{"a":1,"a":2}}}`, want: &Error{Path: "$.saved.variables.a", Line: 1, Column: 30, Err: ErrDuplicateKey}},
		{name: "duplicate past the short list", in: `{"saved":{"variables":{` + manyKeys(20) + `,"k3":0}}}`,
			want: &Error{Path: "$.saved.variables.k3", Line: 1, Column: 174, Err: ErrDuplicateKey}},
		{name: "duplicate in raw JSON", in: `{"saved":{"variables":{"a":{"x":1,"x":2}}}}`, want: &Error{Path: "$.saved.variables.a.x", Line: 1, Column: 35, Err: ErrDuplicateKey}},
		{name: "duplicate under any", in: `{"any":[{"k":1,"k":1}]}`, want: &Error{Path: "$.any[0].k", Line: 1, Column: 16, Err: ErrDuplicateKey}},
		{name: "unknown field", in: `{"nodes":[{},{"argv":[]}]}`, want: &Error{Path: "$.nodes[1].argv", Line: 1, Column: 15, Err: ErrUnknownField}},
		{name: "promoted field by case", in: `{"saved":{"INNER":""}}`, want: &Error{Path: "$.saved.INNER", Line: 1, Column: 11, Err: ErrCaseFolded}},
		{name: "skipped field", in: `{"saved":{"Skipped":1}}`, want: &Error{Path: "$.saved.Skipped", Line: 1, Column: 11, Err: ErrUnknownField}},
		{name: "unexported field", in: `{"saved":{"hidden":1}}`, want: &Error{Path: "$.saved.hidden", Line: 1, Column: 11, Err: ErrUnknownField}},
		{name: "key needing quotes", in: `{"a b":1}`, want: &Error{Path: `$["a b"]`, Line: 1, Column: 2, Err: ErrUnknownField}},
		{name: "two values", in: `{} {}`, want: &Error{Path: "$", Line: 1, Column: 4, Err: ErrTrailing}},
		{name: "duplicate spelled with an escape", in: `{"saved":{"variables":{"a":1,"\u0061":2}}}`, want: &Error{Path: "$.saved.variables.a", Line: 1, Column: 30, Err: ErrDuplicateKey}},
		{name: "duplicate by invalid UTF-8", in: "{\"any\":{\"k\xff\":1,\"k\xfe\":2}}", want: &Error{Path: "$.any[\"k\uFFFD\"]", Line: 1, Column: 16, Err: ErrDuplicateKey}},
		{name: "escaped field name", in: `{"form\u0061t":"x","saved":{"\u0050olicy":null}}`, want: &Error{Path: "$.saved.Policy", Line: 1, Column: 29, Err: ErrCaseFolded}},
		{name: "numbers and literals", in: `{"any":[0,-1.5e+3,1E9,true,false,null,"\"\\\/\b"],"saved":{"Untagged":-0}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d document
			err := Decode([]byte(tc.in), &d)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Decode() = %v, want nil", err)
				}
				return
			}
			var got *Error
			if !errors.As(err, &got) {
				t.Fatalf("Decode() = %v, want %v", err, tc.want)
			}
			got.Detail = ""
			if diff := cmp.Diff(*tc.want, *got, cmp.Comparer(func(a, b error) bool { return a == b })); diff != "" {
				t.Errorf("Decode() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// manyKeys is n members "k0":0, "k1":0, ….
func manyKeys(n int) string {
	var parts []string
	for i := range n {
		parts = append(parts, fmt.Sprintf(`"k%d":0`, i))
	}
	return strings.Join(parts, ",")
}

func TestErrorText(t *testing.T) {
	var d document
	err := Decode([]byte(`{"saved":{"policy":null,"Policy":null}}`), &d)
	want := `$.saved.Policy (line 1, column 25): the key "Policy" differs from the field "policy" only by case: write "policy"`
	if err == nil || err.Error() != want {
		t.Fatalf("Decode() = %v, want %s", err, want)
	}
}

func TestBounds(t *testing.T) {
	var v any
	if err := Decode([]byte(strings.Repeat("[", 600)+strings.Repeat("]", 600)), &v); !errors.Is(err, jsonlimit.ErrTooDeep) {
		t.Errorf("Decode(deep) = %v, want ErrTooDeep", err)
	}
	var se *json.SyntaxError
	if err := Decode([]byte(`{"format":`), &v); err == nil || errors.As(err, &se) == false && err.Error() != "unexpected EOF" {
		t.Errorf("Decode(truncated) = %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{}`, `{"saved":{"policy":{}}}`, `{"a":1,"a":2}`, `[{"k":[{"k":1}]}]`, `{"a\u0062":-0.5e3,"ab":[true,null]}`, "{\"\xff\":1}", `[1,]`, `{"a":01}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var d document
		err := Decode(b, &d)
		var e *Error
		if errors.As(err, &e) && (e.Line < 1 || e.Column < 1 || !strings.HasPrefix(e.Path, "$")) {
			t.Fatalf("Decode(%q) = %v", b, err)
		}
		// The walk's scanner agrees with encoding/json on what is JSON.
		checked := Check(b, nil)
		var se *Error
		var le *jsonlimit.Error
		switch valid := json.Valid(b); {
		case checked == nil && !valid:
			t.Fatalf("Check(%q) accepted what encoding/json says is not JSON", b)
		case checked != nil && valid && !errors.As(checked, &se) && !errors.As(checked, &le):
			t.Fatalf("Check(%q) = %v on valid JSON", b, checked)
		case checked != nil && !valid && !errors.As(checked, &se) && !errors.As(checked, &le):
			var syn *json.SyntaxError
			if !errors.As(checked, &syn) {
				t.Fatalf("Check(%q) = %v (%T), want a *json.SyntaxError", b, checked, checked)
			}
		}
		if err == nil {
			// What strict decoding accepts, encoding/json reads the same way.
			var lax document
			if err := json.Unmarshal(b, &lax); err != nil {
				t.Fatalf("strict accepted what encoding/json refuses: %v", err)
			}
		}
	})
}

// BenchmarkCheck measures the token walk alone on about 10 MiB of nodes (a plan of 10,000 nodes is about 20 MiB).
func BenchmarkCheck(b *testing.B) {
	doc := []byte(`{"format":"x","nodes":[` + strings.Repeat(`{"targets":["docker","run","--rm","--network","none"],"inner":"n","Untagged":1,"variables":{"a":[1,2,3]}},`, 100000) + `{}]}`)
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if err := Check(doc, &document{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnmarshal is encoding/json's decoding of BenchmarkCheck's document, to compare with.
func BenchmarkUnmarshal(b *testing.B) {
	doc := []byte(`{"format":"x","nodes":[` + strings.Repeat(`{"targets":["docker","run","--rm","--network","none"],"inner":"n","Untagged":1,"variables":{"a":[1,2,3]}},`, 100000) + `{}]}`)
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		var d document
		if err := json.Unmarshal(doc, &d); err != nil {
			b.Fatal(err)
		}
	}
}
