package planfile

import (
	"bytes"
	"compress/gzip"
	"errors"
	"runtime"
	"strings"
	"testing"
)

// TestDecompressBounded: a small file that inflates far beyond the bound is refused once the bound is read, with
// an error that says so, and is never read whole.
func TestDecompressBounded(t *testing.T) {
	var z bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
	zeros := make([]byte, 1<<20)
	for i := 0; i < 64; i++ { // 64 MiB of JSON-less zeros in about 64 KiB
		zw.Write(zeros)
	}
	zw.Close()
	if z.Len() > 1<<20 {
		t.Fatalf("the bomb is %d bytes", z.Len())
	}
	const limit = 1 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := Decompress(z.Bytes(), limit)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrInflated) || !strings.Contains(err.Error(), "over 1 MiB") {
		t.Fatalf("Decompress() = %v, want ErrInflated naming the 1 MiB bound", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16*limit {
		t.Errorf("Decompress allocated %d MiB for a bound of 1 MiB: it read the plan whole", alloc>>20)
	}
	// Within the bound, and not compressed, a plan reads as it is.
	var small bytes.Buffer
	zw = gzip.NewWriter(&small)
	zw.Write([]byte(`{"format_version": "1.0"}`))
	zw.Close()
	if b, err := Decompress(small.Bytes(), limit); err != nil || string(b) != `{"format_version": "1.0"}` {
		t.Errorf("Decompress(small) = %q, %v", b, err)
	}
	if b, err := Decompress([]byte(`{}`), 1); err != nil || string(b) != `{}` {
		t.Errorf("Decompress(plain) = %q, %v", b, err)
	}
}
