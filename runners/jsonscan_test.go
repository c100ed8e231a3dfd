package runners

import (
	"encoding/binary"
	"testing"
)

// TestHasSpecial8 checks the eight-at-a-time test against the byte table for every byte value in every position,
// and with two specials in one word.
func TestHasSpecial8(t *testing.T) {
	for c := 0; c < 256; c++ {
		for p := 0; p < 8; p++ {
			w := []byte("aZ~\x7f\xff\x80 !")
			w[p] = byte(c)
			want := false
			for _, x := range w {
				want = want || strSpecial[x]
			}
			if got := hasSpecial8(binary.LittleEndian.Uint64(w)); got != want {
				t.Fatalf("hasSpecial8(%q) = %v, want %v", w, got, want)
			}
		}
	}
	for _, w := range []string{`"\"\"\"\"`, "\x00\x00\x00\x00\x00\x00\x00\x00", "\x1f\x20\x21\x22\x5b\x5c\x5d\x7f", "!!!!!!!#"} {
		want := false
		for i := 0; i < 8; i++ {
			want = want || strSpecial[w[i]]
		}
		if got := hasSpecial8(binary.LittleEndian.Uint64([]byte(w))); got != want {
			t.Errorf("hasSpecial8(%q) = %v, want %v", w, got, want)
		}
	}
}

func TestCount(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"120", 120, true}, {"9223372036854775807", 9223372036854775807, true},
		{"9223372036854775808", 0, false}, {"-1", 0, false}, {"1.5", 0, false}, {"1.0", 1, true}, {"2e2", 200, true},
		{`"7"`, 0, false}, {"null", 0, false}, {"", 0, false},
	}
	for _, tt := range tests {
		got, ok := count([]byte(tt.in))
		if got != tt.want || ok != tt.ok {
			t.Errorf("count(%s) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}
