package gitobj

import (
	"strings"
	"testing"
)

// endless is an inflated stream that never ends: a header, then zero bytes forever; read counts what was taken.
type endless struct {
	header string
	read   int64
}

func (e *endless) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if e.read < int64(len(e.header)) {
			p[n] = e.header[e.read]
		} else {
			p[n] = 0
		}
		n++
		e.read++
	}
	return n, nil
}

// TestInflateObjectBounded: an object is inflated no further than its declared size (itself bounded), so a bomb
// costs a header's worth of reading, not the gigabytes it claims.
func TestInflateObjectBounded(t *testing.T) {
	for _, tc := range []struct {
		header, want string
		maxRead      int64
	}{
		{"blob 107374182400\x00", "more than the", 64},      // claims 100 GiB
		{"blob 10\x00", "longer than its header says", 128}, // claims 10 bytes, never ends
		{"blob 00010\x00", "bad header", 64},
		{strings.Repeat("x", 100), "no header", 64},
	} {
		src := &endless{header: tc.header}
		_, _, err := inflateObject(src, "id")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("inflateObject(%q...) error = %v, want %q", tc.header[:min(len(tc.header), 20)], err, tc.want)
		}
		if src.read > tc.maxRead {
			t.Errorf("inflateObject(%q...) read %d bytes, want at most %d", tc.header[:min(len(tc.header), 20)], src.read, tc.maxRead)
		}
	}
	typ, body, err := inflateObject(strings.NewReader("blob 5\x00hello"), "id")
	if err != nil || typ != "blob" || string(body) != "hello" {
		t.Errorf("inflateObject(a good blob) = %q, %q, %v", typ, body, err)
	}
}
