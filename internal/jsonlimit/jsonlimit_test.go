package jsonlimit

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCheck(t *testing.T) {
	deep := strings.Repeat("[", 501) + strings.Repeat("]", 501)
	for _, tc := range []struct {
		name string
		in   string
		lim  Limits
		want error // nil, or the *Error expected
	}{
		{name: "plain", in: `{"a":[1,{"b":[]}]}`},
		{name: "at the limit", in: strings.Repeat("[", 500) + strings.Repeat("]", 500)},
		{name: "past the limit", in: deep, want: &Error{Line: 1, Column: 501, Depth: 500, Err: ErrTooDeep}},
		{name: "brackets in strings", in: `{"a":"` + strings.Repeat("[{", 2000) + `\"["}`},
		{name: "escaped backslash ends string", in: `["\\", ` + strings.Repeat("[", 3) + `]]]]`, lim: Limits{MaxDepth: 3},
			want: &Error{Line: 1, Column: 10, Depth: 3, Err: ErrTooDeep}},
		{name: "line and column", in: "{\n  \"a\": [\n    [[1]]]}", lim: Limits{MaxDepth: 3},
			want: &Error{Line: 3, Column: 6, Depth: 3, Err: ErrTooDeep}},
		{name: "too large", in: `{"a":1}`, lim: Limits{MaxBytes: 3}, want: &Error{Size: 7, Limit: 3, Err: ErrTooLarge}},
		{name: "malformed is left to the decoder", in: `]]]}}{"a`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check([]byte(tc.in), tc.lim)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Check() = %v, want nil", err)
				}
				return
			}
			var got *Error
			if !errors.As(err, &got) {
				t.Fatalf("Check() = %v, want %v", err, tc.want)
			}
			if diff := cmp.Diff(*tc.want.(*Error), *got, cmp.Comparer(func(a, b error) bool { return a == b })); diff != "" {
				t.Errorf("Check() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestErrorText(t *testing.T) {
	err := Check([]byte(strings.Repeat("{\"a\":", 3)), Limits{MaxDepth: 2})
	if !errors.Is(err, ErrTooDeep) || err.Error() != "line 1, column 11: arrays and objects nest more than 2 levels deep" {
		t.Fatalf("Check() = %q", err)
	}
}

func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{}`, `[[[]]]`, `"\\"[`, strings.Repeat("[", 600)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := Check(b, Limits{MaxDepth: 8})
		var e *Error
		if err != nil && (!errors.As(err, &e) || e.Line < 1 || e.Column < 1) {
			t.Fatalf("Check(%q) = %v", b, err)
		}
	})
}

func BenchmarkCheck(b *testing.B) {
	doc := []byte(strings.Repeat(`{"name":"n","argv":["docker","run","--rm"],"x":[1,2,3]},`, 20000))
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		_ = Check(doc, Limits{})
	}
}
