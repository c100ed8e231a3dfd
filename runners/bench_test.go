package runners

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// benchStream concatenates the captured streams of a vocabulary, repeated until the stream is about size bytes,
// and returns it with its line count.
func benchStream(tb testing.TB, dir string, size int) ([]byte, int) {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "streams", dir, "*.ndjson"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no streams for %s: %v", dir, err)
	}
	var one []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		if len(b) > 0 && b[len(b)-1] != '\n' {
			b = append(b, '\n')
		}
		one = append(one, b...)
	}
	stream := bytes.Repeat(one, max(1, size/len(one)))
	return stream, bytes.Count(stream, []byte("\n"))
}

// BenchmarkMeter feeds each vocabulary's real captures, scaled up to 8 MB, through Feed and its meter. It
// reports throughput (MB/s) and allocations per line.
func BenchmarkMeter(b *testing.B) {
	for _, tc := range []struct{ protocol, dir string }{
		{"claude-code", "claude-code"},
		{"opencode", "opencode"},
		{"pi", "pi"},
		{"hermes", "hermes"},
	} {
		b.Run(tc.protocol, func(b *testing.B) {
			stream, lines := benchStream(b, tc.dir, 8<<20)
			b.SetBytes(int64(len(stream)))
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			cpu := cpuTime()
			b.ResetTimer()
			for b.Loop() {
				m, _ := NewMeter(tc.protocol, "routed")
				if err := Feed(bytes.NewReader(stream), m, io.Discard); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			cpu = cpuTime() - cpu
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(b.N)/float64(lines), "allocs/line")
			if cpu > 0 {
				b.ReportMetric(float64(len(stream))*float64(b.N)/1e6/cpu.Seconds(), "MB/cpu-s")
			}
		})
	}
}

// BenchmarkLine meters single lines without Feed, to show where the time goes per event type.
func BenchmarkLine(b *testing.B) {
	stream, _ := benchStream(b, "claude-code", 0)
	lines := bytes.Split(bytes.TrimSuffix(stream, []byte("\n")), []byte("\n"))
	var n int64
	for _, l := range lines {
		n += int64(len(l)) + 1
	}
	b.SetBytes(n)
	m := newClaudeMeter("")
	for b.Loop() {
		for _, l := range lines {
			m.Line(l)
		}
	}
}

// gibReader generates a long claude-code stream in memory, repeating the captures with an oversized line now and
// then, without ever holding more than one copy: the memory test and benchmark need 1 GiB that is never on disk.
type gibReader struct {
	unit      []byte
	remaining int64
	off       int
	sample    func() // called every sampleEvery bytes
	sinceLast int64
}

const sampleEvery = 32 << 20

func newGibReader(tb testing.TB, total int64, sample func()) *gibReader {
	stream, _ := benchStream(tb, "claude-code", 32<<20)
	// One oversized line per unit (a third of the bytes): Feed must skip it without holding it.
	huge := append(bytes.Repeat([]byte("z"), MaxLineBytes+1), '\n')
	unit := append(append([]byte{}, stream...), huge...)
	return &gibReader{unit: unit, remaining: total, sample: sample}
}

func (g *gibReader) Read(p []byte) (int, error) {
	if g.remaining <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > g.remaining {
		p = p[:g.remaining]
	}
	n := copy(p, g.unit[g.off:])
	g.off = (g.off + n) % len(g.unit)
	g.remaining -= int64(n)
	if g.sinceLast += int64(n); g.sinceLast >= sampleEvery && g.sample != nil {
		g.sinceLast = 0
		g.sample()
	}
	return n, nil
}

// heapPeak samples the live heap; peak-base is what metering the stream holds.
type heapPeak struct{ base, peak uint64 }

func newHeapPeak() *heapPeak {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return &heapPeak{base: ms.HeapAlloc, peak: ms.HeapAlloc}
}

func (h *heapPeak) sample() {
	runtime.GC() // count what is held, not garbage waiting for a cycle
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	h.peak = max(h.peak, ms.HeapAlloc)
}

// TestFeedMemoryFlat meters a 1 GiB synthetic stream (128 MiB under -race or -short, which is slower, not
// different) and asserts a generous bound on heap growth: the buffer may reach MaxLineBytes+1 for the longest
// line, and nothing grows with the stream's length. It asserts memory only, never time.
func TestFeedMemoryFlat(t *testing.T) {
	total := int64(1 << 30)
	if raceEnabled || testing.Short() {
		total = 128 << 20
	}
	h := newHeapPeak()
	g := newGibReader(t, total, h.sample)
	h.sample()
	h.base = h.peak // the generator's own unit is not Feed's memory
	m := newClaudeMeter("")
	if err := Feed(g, m, io.Discard); err != nil {
		t.Fatal(err)
	}
	h.sample()
	const bound = 3 * MaxLineBytes
	if grew := h.peak - h.base; grew > bound {
		t.Errorf("heap grew by %d MiB metering %d MiB, want at most %d MiB", grew>>20, total>>20, bound>>20)
	}
	got := m.Totals()
	// The stream is cut at a byte count, so its last line may be a fragment: at most one unparsed line.
	if got.OversizedLines == 0 || got.Events == 0 || got.UnparsedLines > 1 {
		t.Errorf("unexpected counters on the synthetic stream: %+v", got)
	}
}

// BenchmarkFeedGiB meters 1 GiB of claude-code stream per iteration and reports the peak live heap above the
// baseline, in MiB: it stays flat whatever the stream's length.
func BenchmarkFeedGiB(b *testing.B) {
	b.SetBytes(1 << 30)
	var worst uint64
	for b.Loop() {
		b.StopTimer()
		h := newHeapPeak()
		g := newGibReader(b, 1<<30, nil)
		h.sample()
		h.base = h.peak
		b.StartTimer()
		g.sample = h.sample
		if err := Feed(g, newClaudeMeter(""), io.Discard); err != nil {
			b.Fatal(err)
		}
		worst = max(worst, h.peak-h.base)
	}
	b.ReportMetric(float64(worst)/(1<<20), "peak-heap-MiB")
}
