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
		{"\u2028\u2029", `\u2028\u2029`, `\u2028\u2029`},
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

// dangerous is every character of the three escapers kewplan had before this package was its only one (its own
// list, views.EscapeTerminal's and views.Sanitize's), with C0, DEL, C1 and invalid UTF-8: their union.
func dangerous() []string {
	var out []string
	for c := 0; c < 0x20; c++ {
		out = append(out, string(rune(c)))
	}
	out = append(out, "\x7f")
	for r := rune(0x80); r <= 0x9f; r++ {
		out = append(out, string(r))
	}
	for _, r := range []rune{0x061c, 0x200e, 0x200f, 0x2028, 0x2029, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e,
		0x2066, 0x2067, 0x2068, 0x2069} {
		out = append(out, string(r))
	}
	return append(out, "\xff", "\xfe", "\xc3", "\xe2\x80", "\xed\xa0\x80") // invalid: lone, truncated, surrogate
}

// TestEveryFunctionEscapesTheUnion: no exported function lets a character of any of the old lists through (Text
// keeps newline and tab, its layout; Flatten turns them into spaces).
func TestEveryFunctionEscapesTheUnion(t *testing.T) {
	funcs := map[string]func(string) string{"String": String, "Text": Text, "ANSICQuote": ANSICQuote, "Flatten": Flatten}
	for _, ch := range dangerous() {
		in := "a" + ch + "b"
		if !NeedsEscape(in) {
			t.Errorf("NeedsEscape(%q) = false", in)
		}
		for name, f := range funcs {
			out := f(in)
			if !utf8.ValidString(out) {
				t.Errorf("%s(%q) = %q is not valid UTF-8", name, in, out)
			}
			if name == "Text" && (ch == "\n" || ch == "\t") {
				continue
			}
			for _, r := range out {
				if r < 0x20 || r == 0x7f || isUnsafeRune(r) {
					t.Errorf("%s(%q) = %q lets %U through", name, in, out, r)
				}
			}
		}
	}
}

func TestFlatten(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain text", "plain text"},
		{"\x1b[2Jclear", "[2Jclear"},
		{"osc\x1b]52;c;ZXZpbA==\x07end", "osc]52;c;ZXZpbA==end"},
		{"cr\roverwrite\nnext\ttab", "cr overwrite next tab"},
		{"c1\u009b31mred", "c131mred"},
		{"bad\xffutf8", "bad\uFFFDutf8"},
		{"rtl\u202eevil\u200f\u061c\u2028", "rtlevil"},
		{"del\x7f", "del"},
		{"ünïcødé ✓", "ünïcødé ✓"},
	} {
		if got := Flatten(tc.in); got != tc.want {
			t.Errorf("Flatten(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
