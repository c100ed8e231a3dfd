package termsafe

import (
	"os/exec"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEscape(t *testing.T) {
	for _, tc := range []struct {
		in, str, text string
	}{
		{"claude-sonnet-4-5", "claude-sonnet-4-5", "claude-sonnet-4-5"},
		{"\x1b[2J\x1b]0;PWNED\x07", `\x1b[2J\x1b]0;PWNED\x07`, `\x1b[2J\x1b]0;PWNED\x07`},
		{"a\nb\tc\rd", `a\nb\tc\rd`, "a\nb\tc\\rd"},
		{"del\x7f", `del\x7f`, `del\x7f`},
		{"c1\u0085\u009b", `c1\u0085\u009b`, `c1\u0085\u009b`},
		{"if \u202eevil\u202c", `if \u202eevil\u202c`, `if \u202eevil\u202c`},
		{"\u2066\u2067\u2068\u2069\u200e\u200f\u061c", `\u2066\u2067\u2068\u2069\u200e\u200f\u061c`, `\u2066\u2067\u2068\u2069\u200e\u200f\u061c`},
		{"bad\xff\xfe", `bad\xff\xfe`, `bad\xff\xfe`},
		{"café ☕ \\x1b", "café ☕ \\x1b", "café ☕ \\x1b"},
	} {
		if got := String(tc.in); got != tc.str {
			t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.str)
		}
		if got := Text(tc.in); got != tc.text {
			t.Errorf("Text(%q) = %q, want %q", tc.in, got, tc.text)
		}
		if NeedsEscape(tc.in) != (String(tc.in) != tc.in) {
			t.Errorf("NeedsEscape(%q) disagrees with String", tc.in)
		}
	}
}

// TestANSICQuoteRoundTrips: what a reviewer pastes into bash is the original word.
func TestANSICQuoteRoundTrips(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	for _, in := range []string{"\x1b[2J\x1b]0;PWNED\x07", "it's a \\ back\nslash", "\u202eevil", "\xff\xfe"} {
		q := ANSICQuote(in)
		if !Safe(q) {
			t.Errorf("ANSICQuote(%q) = %q holds an unsafe character", in, q)
		}
		out, err := exec.Command(bash, "-c", "printf %s "+q).Output()
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != in {
			t.Errorf("bash reads %q as %q, want %q", q, out, in)
		}
	}
}

// Safe reports whether s can be written to a terminal as it is (test helper and invariant).
func Safe(s string) bool { return !NeedsEscape(strings.NewReplacer("\n", "", "\t", "").Replace(s)) }

func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "\x1b[2J", "\u202e", "\xff", "a\nb", "\u0085"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, got := range []string{String(s), Text(s), ANSICQuote(s)} {
			if !utf8.ValidString(got) || !Safe(got) {
				t.Fatalf("escape(%q) = %q is not safe", s, got)
			}
		}
		if strings.ContainsAny(String(s), "\n\t") {
			t.Fatalf("String(%q) kept a newline or tab", s)
		}
	})
}

func BenchmarkText(b *testing.B) {
	s := strings.Repeat("node \"fix\" { model = \"claude-sonnet-4-5\" } café\n", 1000)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		_ = Text(s)
	}
}
