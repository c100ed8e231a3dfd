package redact

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kewplan/kewplan/internal/testtools/redacttest"
)

// TestEveryEncodingIsMasked writes each common encoding of a realistic key through the masking writer, the
// stream cut into Write calls at every position, and decodes the stored bytes every way a reader could: the key
// appears in none. Stream lines stay valid JSON and keep their line breaks.
func TestEveryEncodingIsMasked(t *testing.T) {
	m := New(redacttest.Key)
	for _, c := range redacttest.Cases(redacttest.Key) {
		t.Run(c.Name, func(t *testing.T) {
			for _, in := range []string{c.Stdout, c.Stderr} {
				if in == "" {
					continue
				}
				in += "\n"
				if len(redacttest.Leaks(in, redacttest.Key)) == 0 {
					t.Fatalf("the checker finds no key in the unmasked %q", in)
				}
				want := m.String(in)
				if leaks := redacttest.Leaks(want, redacttest.Key); len(leaks) > 0 {
					t.Fatalf("masked %q\nstill holds the key: %s", want, strings.Join(leaks, "\n"))
				}
				if strings.Count(want, "\n") != strings.Count(in, "\n") {
					t.Errorf("masking changed the number of lines: %q", want)
				}
				if strings.HasPrefix(in, "{") && !json.Valid([]byte(strings.TrimSpace(want))) {
					t.Errorf("masked stream line is not JSON: %q", want)
				}
				for cut := 0; cut <= len(in); cut++ {
					var b bytes.Buffer
					w := m.Writer(&b)
					w.Write([]byte(in[:cut]))
					w.Write([]byte(in[cut:]))
					w.Flush()
					if b.String() != want {
						t.Fatalf("cut at %d: %q, at once %q", cut, b.String(), want)
					}
				}
			}
		})
	}
}

// TestOrdinaryStreamsAreKept: the captured agent streams hold no secret and are stored byte for byte.
func TestOrdinaryStreamsAreKept(t *testing.T) {
	in := benchStream(&testing.B{})
	var b bytes.Buffer
	w := New(benchSecrets...).Writer(&b)
	w.Write(in)
	w.Flush()
	if !bytes.Equal(b.Bytes(), in) {
		t.Error("a stream without secrets was changed")
	}
}
