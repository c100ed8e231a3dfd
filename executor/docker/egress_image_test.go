package docker

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kewplan/kewplan/egress"
	"github.com/kewplan/kewplan/executor/adapter"
	"github.com/kewplan/kewplan/executor/statedir"
)

// TestEgressImageTagCache: the proxy image's tag is remembered for exactly the binary it was computed from; a
// rebuilt binary, or a record naming anything but a proxy image, is a miss (the binary is hashed again).
func TestEgressImageTagCache(t *testing.T) {
	dir := t.TempDir()
	a := &dockerEngine{run: &adapter.Run{Dir: statedir.Dir{Root: dir}}}
	bin := filepath.Join(dir, "kewplan")
	if err := os.WriteFile(bin, []byte("binary one"), 0o755); err != nil {
		t.Fatal(err)
	}
	id, err := identifyAll(bin, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := a.readImageTagCache(id); ok {
		t.Fatal("hit before anything was recorded")
	}
	const tag = "kewplan-egress-proxy:0123456789abcdef"
	a.writeImageTagCache(id, tag)
	if got, ok := a.readImageTagCache(id); !ok || got != tag {
		t.Fatalf("readImageTagCache = %q, %v; want %q", got, ok, tag)
	}

	// The binary rebuilt in place: another size and modification time.
	if err := os.WriteFile(bin, []byte("binary two, longer"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(bin, time.Now().Add(time.Hour), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	id2, err := identifyAll(bin, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := a.readImageTagCache(id2); ok {
		t.Fatalf("a rebuilt binary hit the record of the old one: %q", got)
	}

	// A dynamic binary's record covers its libraries: one replaced (another identity at the same image path) or
	// one more is a miss.
	lib := filepath.Join(dir, "libc.so.6")
	if err := os.WriteFile(lib, []byte("libc one"), 0o644); err != nil {
		t.Fatal(err)
	}
	runtime := []egress.RuntimeFile{{Path: "/lib/x86_64-linux-gnu/libc.so.6", Source: lib}}
	dyn, err := identifyAll(bin, runtime)
	if err != nil {
		t.Fatal(err)
	}
	a.writeImageTagCache(dyn, tag)
	if got, ok := a.readImageTagCache(dyn); !ok || got != tag {
		t.Fatalf("readImageTagCache(dynamic) = %q, %v; want %q", got, ok, tag)
	}
	if _, ok := a.readImageTagCache(id2); ok {
		t.Error("the record of a dynamic binary hit for the binary without its libraries")
	}
	if err := os.WriteFile(lib, []byte("libc two, upgraded"), 0o644); err != nil {
		t.Fatal(err)
	}
	upgraded, err := identifyAll(bin, runtime)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := a.readImageTagCache(upgraded); ok {
		t.Errorf("an upgraded library hit the record of the old one: %q", got)
	}

	// A record edited to name another image is not trusted.
	for _, bad := range []string{"alpine:latest", "kewplan-egress-proxy:latest", "kewplan-egress-proxy:0123456789ABCDEF", ""} {
		a.writeImageTagCache(id2, bad)
		if got, ok := a.readImageTagCache(id2); ok {
			t.Errorf("a record naming %q was trusted: %q", bad, got)
		}
	}
	if err := os.WriteFile(statedir.Dir{Root: dir}.EgressImageCache(), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.readImageTagCache(id2); ok {
		t.Error("a record that does not parse was trusted")
	}
}
