package verdict

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDecodeVerdictAccepts(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Verdict
	}{
		{
			name: "approve without findings",
			in:   `{"verdict":"approve","summary":"looks right"}`,
			want: Verdict{Verdict: Approve, Summary: "looks right", Findings: []Finding{}},
		},
		{
			name: "request_changes with findings and whitespace",
			in: "\n\t{ \"verdict\" : \"request_changes\" ,\r\n \"summary\": \"two problems\",\n" +
				` "findings": [ {"path": "a/b.go", "line": 12, "message": "nil deref"},` +
				` {"message": "no test", "line": 0, "path": ""} ] }` + "\n",
			want: Verdict{Verdict: RequestChanges, Summary: "two problems", Findings: []Finding{
				{Path: "a/b.go", Line: 12, Message: "nil deref"},
				{Path: "", Line: 0, Message: "no test"},
			}},
		},
		{
			name: "reject with empty findings and empty summary",
			in:   `{"findings":[],"summary":"","verdict":"reject"}`,
			want: Verdict{Verdict: Reject, Summary: "", Findings: []Finding{}},
		},
		{
			name: "escapes, tab, newline and a surrogate pair",
			in:   `{"verdict":"approve","summary":"caf\u00e9\t\"ok\"\n\/ \ud83d\ude00 ✓"}`,
			want: Verdict{Verdict: Approve, Summary: "café\t\"ok\"\n/ 😀 ✓", Findings: []Finding{}},
		},
		{
			name: "an escaped key still names the field",
			in:   `{"verd\u0069ct":"approve","summary":"s"}`,
			want: Verdict{Verdict: Approve, Summary: "s", Findings: []Finding{}},
		},
		{
			name: "largest line",
			in:   `{"verdict":"approve","summary":"s","findings":[{"path":"p","line":2147483647,"message":"m"}]}`,
			want: Verdict{Verdict: Approve, Summary: "s", Findings: []Finding{{Path: "p", Line: 2147483647, Message: "m"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeVerdict([]byte(tt.in))
			if err != nil {
				t.Fatalf("decodeVerdict(%q) error: %v", tt.in, err)
			}
			sum := sha256.Sum256([]byte(tt.in))
			tt.want.SHA256 = hex.EncodeToString(sum[:])
			if diff := cmp.Diff(tt.want, *got); diff != "" {
				t.Errorf("decodeVerdict() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeVerdictRefuses(t *testing.T) {
	const ok = `"summary":"s"`
	tests := []struct {
		name string
		in   string
		want string // the diagnostic, "line:col: message"
	}{
		{"empty", ``, `1:1: the file is empty; want a JSON object such as {"verdict": "approve", "summary": "..."}`},
		{"whitespace only", " \n\t", `2:2: the file is empty; want a JSON object such as {"verdict": "approve", "summary": "..."}`},
		{"byte order mark", "\xef\xbb\xbf{\"verdict\":\"approve\"," + ok + "}", `1:1: the file starts with a UTF-8 byte order mark; write plain UTF-8 JSON`},
		{"invalid UTF-8 in a string", "{\"verdict\":\"approve\",\"summary\":\"a\xffb\"}", `1:34: invalid UTF-8; the sidecar must be UTF-8 JSON`},
		{"NUL byte", "{\"verdict\":\"approve\"," + ok + "}\x00", `1:36: unexpected data after the verdict object; the sidecar must hold exactly one JSON object`},
		{"truncated", `{"verdict":"approve",`, `1:22: expected a quoted key in the verdict`},
		{"truncated string", `{"verdict":"appr`, `1:17: unterminated string: the file ends early`},
		{"not an object", `["approve"]`, `1:1: the verdict must be a JSON object`},
		{"bare string", `"approve"`, `1:1: the verdict must be a JSON object`},
		{"duplicate verdict", `{"verdict":"reject","verdict":"approve",` + ok + `}`, `1:21: duplicate key "verdict" in the verdict (first at 1:2); each key may appear once`},
		{"duplicate through an escape", `{"verdict":"reject","verd\u0069ct":"approve",` + ok + `}`, `1:21: duplicate key "verdict" in the verdict (first at 1:2); each key may appear once`},
		{"case variant after", `{"verdict":"reject","VERDICT":"approve",` + ok + `}`, `1:21: key "VERDICT" in the verdict differs only in case from "verdict"; keys are case-sensitive`},
		{"case variant alone", `{"Verdict":"approve",` + ok + `}`, `1:2: key "Verdict" in the verdict differs only in case from "verdict"; keys are case-sensitive`},
		{"unknown field", `{"verdict":"approve",` + ok + `,"approved":true}`, `1:36: unknown key "approved" in the verdict; allowed keys are "verdict", "summary", "findings"`},
		{"second object", `{"verdict":"approve",` + ok + `} {"verdict":"reject"}`, `1:37: unexpected data after the verdict object; the sidecar must hold exactly one JSON object`},
		{"trailing garbage", `{"verdict":"approve",` + ok + `}garbage`, `1:36: unexpected data after the verdict object; the sidecar must hold exactly one JSON object`},
		{"trailing comma", `{"verdict":"approve",` + ok + `,}`, `1:36: trailing comma in the verdict`},
		{"missing verdict", `{` + ok + `}`, `1:1: the verdict object has no "verdict" key; "verdict" and "summary" are required`},
		{"missing summary", `{"verdict":"approve"}`, `1:1: the verdict object has no "summary" key; "verdict" and "summary" are required`},
		{"verdict case", `{"verdict":"Approve",` + ok + `}`, `1:12: verdict "Approve" is not one of "approve", "request_changes", "reject" (exact spelling)`},
		{"verdict with space", `{"verdict":"approve ",` + ok + `}`, `1:12: verdict "approve " is not one of "approve", "request_changes", "reject" (exact spelling)`},
		{"verdict true", `{"verdict":true,` + ok + `}`, `1:12: verdict must be a string, found a boolean`},
		{"verdict null", `{"verdict":null,` + ok + `}`, `1:12: verdict must be a string, found null`},
		{"summary number", `{"verdict":"approve","summary":1}`, `1:32: summary must be a string, found a number`},
		{"summary escape control", `{"verdict":"approve","summary":"\u001b[2J"}`, `1:32: summary contains the control character U+001B; verdict text must be printable`},
		{"summary carriage return", `{"verdict":"approve","summary":"a\rb"}`, `1:32: summary contains the control character U+000D; verdict text must be printable`},
		{"summary C1 control", `{"verdict":"approve","summary":"\u009b"}`, `1:32: summary contains the control character U+009B; verdict text must be printable`},
		{"raw newline in a string", "{\"verdict\":\"approve\",\"summary\":\"a\nb\"}", `1:34: raw control character 0x0a inside a string; JSON needs it escaped`},
		{"lone high surrogate", `{"verdict":"approve","summary":"\ud800"}`, `1:33: lone UTF-16 surrogate \uD800; escape a whole character`},
		{"lone low surrogate", `{"verdict":"approve","summary":"\udc00x"}`, `1:33: lone UTF-16 surrogate \uDC00; escape a whole character`},
		{"bad escape", `{"verdict":"approve","summary":"\x41"}`, `1:33: invalid escape \x in a string`},
		{"findings null", `{"verdict":"approve",` + ok + `,"findings":null}`, `1:47: findings must be an array, found null`},
		{"findings object", `{"verdict":"approve",` + ok + `,"findings":{}}`, `1:47: findings must be an array, found an object`},
		{"finding not object", `{"verdict":"approve",` + ok + `,"findings":["x"]}`, `1:48: findings[0] must be an object, found a string`},
		{"finding missing line", `{"verdict":"approve",` + ok + `,"findings":[{"path":"p","message":"m"}]}`, `1:48: findings[0] has no "line" key; a finding needs "path", "line" and "message"`},
		{"finding unknown key", `{"verdict":"approve",` + ok + `,"findings":[{"path":"p","line":1,"message":"m","severity":"high"}]}`, `1:83: unknown key "severity" in findings[0]; allowed keys are "path", "line", "message"`},
		{"finding duplicate path", `{"verdict":"approve",` + ok + `,"findings":[{"path":"p","PATH":"q","line":1,"message":"m"}]}`, `1:60: key "PATH" in findings[0] differs only in case from "path"; keys are case-sensitive`},
		{"line fraction", `{"verdict":"approve",` + ok + `,"findings":[{"path":"p","line":1.5,"message":"m"}]}`, `1:67: findings[0].line must be a whole number without a fraction or exponent`},
		{"line exponent", `{"verdict":"approve",` + ok + `,"findings":[{"path":"p","line":1e3,"message":"m"}]}`, `1:67: findings[0].line must be a whole number without a fraction or exponent`},
		{"line negative", `{"verdict":"approve",` + ok + `,"findings":[{"path":"p","line":-1,"message":"m"}]}`, `1:67: findings[0].line must not be negative`},
		{"line leading zero", `{"verdict":"approve",` + ok + `,"findings":[{"path":"p","line":01,"message":"m"}]}`, `1:67: findings[0].line has a leading zero, which JSON does not allow`},
		{"line string", `{"verdict":"approve",` + ok + `,"findings":[{"path":"p","line":"1","message":"m"}]}`, `1:67: findings[0].line must be a whole number, found a string`},
		{"line too large", `{"verdict":"approve",` + ok + `,"findings":[{"path":"p","line":2147483648,"message":"m"}]}`, `1:67: findings[0].line is larger than 2147483647`},
		{"findings trailing comma", `{"verdict":"approve",` + ok + `,"findings":[{"path":"p","line":1,"message":"m"},]}`, `1:84: trailing comma in findings`},
		{"deep nesting", `{"verdict":"approve",` + ok + `,"findings":[` + strings.Repeat("[", 10000), `1:48: findings[0] must be an object, found an array`},
		{"deep nesting as the verdict", `{"verdict":` + strings.Repeat("[", 10000), `1:12: verdict must be a string, found an array`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := decodeVerdict([]byte(tt.in))
			if err == nil {
				t.Fatalf("decodeVerdict(%q) = %+v, want an error", tt.in, v)
			}
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("decodeVerdict(%q) error %T %v, want *SyntaxError", tt.in, err, err)
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("decodeVerdict(%q) error mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

// TestDecodeVerdictStdlibIsAmbiguous is the control for the strict parser: encoding/json really does let a
// duplicate or case-variant key override the verdict, so a lenient decoder would approve these inputs.
func TestDecodeVerdictStdlibIsAmbiguous(t *testing.T) {
	for _, in := range []string{
		`{"verdict":"reject","verdict":"approve","summary":"s"}`,
		`{"verdict":"reject","VERDICT":"approve","summary":"s"}`,
	} {
		var v struct {
			Verdict string `json:"verdict"`
		}
		if err := json.Unmarshal([]byte(in), &v); err != nil || v.Verdict != Approve {
			t.Fatalf("control: json.Unmarshal(%q) = %q, %v; want approve (the attack is no longer live)", in, v.Verdict, err)
		}
		if got, err := decodeVerdict([]byte(in)); err == nil {
			t.Errorf("decodeVerdict(%q) = %+v, want an error", in, got)
		}
	}
}

func BenchmarkDecodeVerdict(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"verdict":"request_changes","summary":"several findings","findings":[`)
	for i := range 1000 {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`{"path":"pkg/file.go","line":123,"message":"this line needs a closer look \u00e9"}`)
	}
	sb.WriteString(`]}`)
	data := []byte(sb.String())
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := decodeVerdict(data); err != nil {
			b.Fatal(err)
		}
	}
}
