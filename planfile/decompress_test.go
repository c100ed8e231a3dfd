package planfile

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
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

// TestReadInflatedWithinMemory: a saved plan of about a megabyte that inflates to a gigabyte is refused by Read
// having allocated well under 256 MiB in all (TotalAlloc counts every allocation, so the bound holds for the peak
// too, whatever the collector did meanwhile), and within MaxBytes of JSON read.
func TestReadInflatedWithinMemory(t *testing.T) {
	var member bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&member, gzip.BestCompression)
	zw.Write([]byte(`{"format_version": "1.0", "x": "`))
	spaces := bytes.Repeat([]byte(" "), 16<<20)
	zw.Write(spaces)
	zw.Close()
	// Gzip members one after the other read as one stream: 64 of 16 MiB are a gigabyte of JSON-less text.
	bomb := bytes.Repeat(member.Bytes(), 64)
	if len(bomb) > 4<<20 {
		t.Fatalf("the bomb is %d bytes", len(bomb))
	}
	path := filepath.Join(t.TempDir(), "bomb.plan")
	if err := os.WriteFile(path, bomb, 0o600); err != nil {
		t.Fatal(err)
	}
	spaces, member = nil, bytes.Buffer{}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := Read(path)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrInflated) {
		t.Fatalf("Read() = %v, want ErrInflated", err)
	}
	const budget = 256 << 20
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > budget {
		t.Errorf("Read allocated %d MiB refusing a gigabyte plan, over the budget of %d MiB", alloc>>20, budget>>20)
	} else {
		t.Logf("Read allocated %d MiB refusing a gigabyte plan", alloc>>20)
	}
}

// TestDecompressSizeHintUntrusted: a gzip trailer that lies about the content's size changes nothing but how
// the content is read: a short claim reads on in chunks, a huge one is not allocated.
func TestDecompressSizeHintUntrusted(t *testing.T) {
	content := bytes.Repeat([]byte("0123456789"), 1<<20) // 10 MiB
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write(content)
	zw.Close()
	for _, isize := range []uint32{0, 5, 1 << 31, 0xffffffff} {
		b := bytes.Clone(z.Bytes())
		binary.LittleEndian.PutUint32(b[len(b)-4:], isize)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		got, err := Decompress(b, 1<<30)
		runtime.ReadMemStats(&after)
		// The trailer's size is checked by gzip at the end: a lie is a damaged file, refused, never a huge buffer.
		if err == nil && !bytes.Equal(got, content) {
			t.Errorf("ISIZE %d: Decompress() returned other content", isize)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
			t.Errorf("ISIZE %d: Decompress allocated %d MiB for 10 MiB of content", isize, alloc>>20)
		}
	}
}
