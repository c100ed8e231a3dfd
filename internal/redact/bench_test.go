package redact

import (
	"bytes"
	"io"
	"os"
	"testing"
)

// benchSecrets are what apply masks in a typical node's logs: an API key and the node's proxy secret.
var benchSecrets = []string{
	"sk-ant-api03-" + "h7Qm2xVd9KpL4nRt8WbYc3FgJs6ZaE1uNoPq5TiX",
	"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
}

// benchStream is about 1 MiB of real agent stdout (the captured fixtures, repeated).
func benchStream(b *testing.B) []byte {
	one, err := os.ReadFile("testdata/streams.ndjson")
	if err != nil {
		b.Fatal(err)
	}
	return bytes.Repeat(one, (1<<20)/len(one)+1)
}

// BenchmarkWriter streams the fixture through a masking writer in 32 KiB chunks, as a container's stdout
// arrives.
func BenchmarkWriter(b *testing.B) {
	in := benchStream(b)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		w := NewWriter(io.Discard, benchSecrets)
		for p := in; len(p) > 0; {
			n := min(32<<10, len(p))
			w.Write(p[:n])
			p = p[n:]
		}
		w.Flush()
	}
}

// BenchmarkWriterLines writes one line per Write call, as a line-buffered agent does.
func BenchmarkWriterLines(b *testing.B) {
	in := benchStream(b)
	lines := bytes.SplitAfter(in, []byte("\n"))
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		w := NewWriter(io.Discard, benchSecrets)
		for _, l := range lines {
			w.Write(l)
		}
		w.Flush()
	}
}

// BenchmarkNew builds a node's masker.
func BenchmarkNew(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		New(benchSecrets...)
	}
}

// BenchmarkMaskerString masks one short event string with a masker built once, as the transcript does.
func BenchmarkMaskerString(b *testing.B) {
	s := `I ran the tests: 14 passed, 0 failed. The build is green and the change is ready for review.`
	m := New(benchSecrets...)
	b.ReportAllocs()
	for b.Loop() {
		m.String(s)
	}
}

// BenchmarkString masks one short event string, building the masker each time, as the ledger's strings are.
func BenchmarkString(b *testing.B) {
	s := `I ran the tests: 14 passed, 0 failed. The build is green and the change is ready for review.`
	b.ReportAllocs()
	for b.Loop() {
		String(s, benchSecrets)
	}
}
