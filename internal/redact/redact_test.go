package redact

import (
	"bytes"
	"encoding/base64"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const secret = "sk-ant-api03-Zq9/x+Y=w&k?p" // base64 and URL metacharacters on purpose

func TestStringMasksEveryForm(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"raw", `{"text":"key ` + secret + ` end"}`, `{"text":"key [MASKED] end"}`},
		{"std base64", "b64 " + base64.StdEncoding.EncodeToString([]byte(secret)) + ".", "b64 [MASKED]."},
		{"url base64", "b64 " + base64.URLEncoding.EncodeToString([]byte(secret)) + ".", "b64 [MASKED]."},
		{"raw base64", "b64 " + base64.RawStdEncoding.EncodeToString([]byte(secret)) + ".", "b64 [MASKED]."},
		{"query escape", "u=" + url.QueryEscape(secret) + "&", "u=[MASKED]&"},
		{"path escape", "/p/" + url.PathEscape(secret) + "/", "/p/[MASKED]/"},
		{"lower-case hex", "u=sk-ant-api03-Zq9%2fx%2bY%3dw%26k%3fp&", "u=[MASKED]&"},
		{"json escaped", `"a\"b` + `"`, `"a\"b"`},
		{"twice, adjacent", secret + secret, "[MASKED][MASKED]"},
		{"nothing to mask", "plain text\n", "plain text\n"},
		{"every other byte kept", "\x00\xff" + secret + "\r\n", "\x00\xff[MASKED]\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, String(tt.in, []string{secret})); diff != "" {
				t.Errorf("String() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestJSONEscapedSecret(t *testing.T) {
	s := `pa"ss\word1`
	got := String(`{"v":"pa\"ss\\word1"}`, []string{s})
	if got != `{"v":"[MASKED]"}` {
		t.Errorf("String() = %q, want the JSON-escaped form masked", got)
	}
}

// TestEmbeddedBase64 hides the secret inside a longer base64 payload (an agent base64-encoding a file that holds
// the key) at each of the three alignments.
func TestEmbeddedBase64(t *testing.T) {
	for off := 0; off < 3; off++ {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			payload := strings.Repeat("x", off) + "TOKEN=" + secret + "\nmore config after it\n"
			encoded := enc.EncodeToString([]byte(payload))
			got := String(encoded, []string{secret})
			if !strings.Contains(got, Mask) {
				t.Errorf("offset %d: %q not masked in %q", off, secret, encoded)
			}
			// The bytes that do not encode the secret are kept.
			if !strings.HasPrefix(got, encoded[:4]) {
				t.Errorf("offset %d: prefix changed: %q", off, got)
			}
		}
	}
}

// TestSplitWrites writes the same stream cut at every position: the result never depends on how Write calls
// split it, and a secret cut in two is still masked.
func TestSplitWrites(t *testing.T) {
	in := "start " + secret + " middle " + base64.StdEncoding.EncodeToString([]byte(secret)) + " end " + url.QueryEscape(secret)
	want := String(in, []string{secret})
	if strings.Contains(want, secret) {
		t.Fatalf("one-shot output leaks: %q", want)
	}
	for cut := 0; cut <= len(in); cut++ {
		for cut2 := cut; cut2 <= len(in); cut2 += 7 {
			var b bytes.Buffer
			w := NewWriter(&b, []string{secret})
			for _, part := range []string{in[:cut], in[cut:cut2], in[cut2:]} {
				if n, err := w.Write([]byte(part)); err != nil || n != len(part) {
					t.Fatalf("Write() = %d, %v", n, err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, b.String()); diff != "" {
				t.Fatalf("cut at %d,%d: mismatch (-want +got):\n%s", cut, cut2, diff)
			}
		}
	}
}

// TestHoldsBackOnlyWhatCouldBeginASecret: text that cannot begin a secret is written at once; the beginning of
// one is held until the bytes after it decide, and never more than a match's longest raw span.
func TestHoldsBackOnlyWhatCouldBeginASecret(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b, []string{secret})
	w.Write([]byte(strings.Repeat(".", 1000)))
	if b.Len() != 1000 {
		t.Errorf("held %d bytes of text that cannot begin a secret, want 0", 1000-b.Len())
	}
	w.Write([]byte(secret[:10]))
	if b.Len() != 1000 {
		t.Errorf("wrote %q, the beginning of the secret", b.String()[1000:])
	}
	// Line breaks are skipped inside a match, but not for ever.
	w.Write([]byte(strings.Repeat(`\n`, 5000)))
	if held := 1000 + 10 + 10000 - b.Len(); held > New(secret).maxRaw {
		t.Errorf("held %d bytes, more than a match's longest raw span", held)
	}
}

func TestNoSecretsPassesThrough(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b, []string{"", ""})
	w.Write([]byte("abc"))
	if b.String() != "abc" {
		t.Errorf("got %q, want the bytes written through at once", b.String())
	}
}

func TestForms(t *testing.T) {
	if Forms("") != nil {
		t.Error("Forms(\"\") is not empty")
	}
	f := Forms("abcdefgh")
	for i := 1; i < len(f); i++ {
		if len(f[i]) > len(f[i-1]) {
			t.Fatalf("Forms() not longest first: %q", f)
		}
	}
}

func FuzzWriter(f *testing.F) {
	f.Add("hello "+secret+" world", "sk-ant-api03-Zq9/x+Y=w&k?p", uint16(3), uint16(9))
	f.Add("aaaaaaaa", "aa", uint16(1), uint16(2))
	f.Add("c2VjcmV0LXZhbHVl", "secret-value", uint16(5), uint16(5))
	f.Fuzz(func(t *testing.T, in, sec string, c1, c2 uint16) {
		if len(in) > 4096 || len(sec) > 256 {
			return
		}
		a, b := int(c1)%(len(in)+1), int(c2)%(len(in)+1)
		if a > b {
			a, b = b, a
		}
		var out bytes.Buffer
		w := NewWriter(&out, []string{sec})
		for _, part := range []string{in[:a], in[a:b], in[b:]} {
			if n, err := w.Write([]byte(part)); err != nil || n != len(part) {
				t.Fatalf("Write() = %d, %v", n, err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if want := New(sec).String(in); out.String() != want {
			t.Fatalf("streamed %q, at once %q", out.String(), want)
		}
		// A secret made of characters the mask does not contain, and no escape or line break, never survives.
		if sec != "" && !strings.ContainsAny(sec, "[MASKED]\\%\r\n") && strings.Contains(out.String(), sec) {
			t.Fatalf("secret %q survives in %q", sec, out.String())
		}
	})
}

// TestCompleteLinesAreNotHeldBack: a line is written whole as soon as its "\n" is, so that a log followed as it
// is written shows every complete line; a secret split across writes is still masked.
func TestCompleteLinesAreNotHeldBack(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out, []string{secret})
	w.Write([]byte(`{"a":1}` + "\n" + `{"b":"` + secret[:5]))
	if got := out.String(); got != `{"a":1}`+"\n"+`{"b":"` {
		t.Errorf("after the first write: %q", got)
	}
	w.Write([]byte(secret[5:] + `"}` + "\n"))
	if got := out.String(); got != `{"a":1}`+"\n"+`{"b":"[MASKED]"}`+"\n" {
		t.Errorf("after the line's end: %q", got)
	}
	// A secret holding a newline is masked with its line break kept, so that the stream keeps its lines.
	out.Reset()
	w = NewWriter(&out, []string{"line one\nline two"})
	w.Write([]byte("x line one\n"))
	w.Write([]byte("line two y\n"))
	w.Flush()
	if got := out.String(); got != "x [MASKED]\n y\n" {
		t.Errorf("multi-line secret: %q", got)
	}
}
