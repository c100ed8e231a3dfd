//go:build unix

package broker

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// bombBlobs writes n valid blobs of size zero bytes each (distinct: a counter leads each one) into the checkout's
// object store as loose objects and returns their ids. Each compresses to about a thousandth of its size.
func bombBlobs(fx *brokerFixture, n, size int) []string {
	fx.t.Helper()
	var ids []string
	for i := 0; i < n; i++ {
		content := append([]byte(fmt.Sprintf("bomb %d\n", i)), make([]byte, size)...)
		cmd := exec.Command("git", "hash-object", "-w", "--stdin")
		cmd.Dir = fx.checkout
		cmd.Env = fx.env
		cmd.Stdin = bytes.NewReader(content)
		out, err := cmd.Output()
		if err != nil {
			fx.t.Fatalf("git hash-object: %v", err)
		}
		ids = append(ids, strings.TrimSpace(string(out)))
	}
	return ids
}

// looseBytes is the size on disk of the checkout's loose objects.
func looseBytes(t *testing.T, checkout string, ids []string) int64 {
	var total int64
	for _, id := range ids {
		st, err := os.Stat(filepath.Join(checkout, ".git", "objects", id[:2], id[2:]))
		if err != nil {
			t.Fatal(err)
		}
		total += st.Size()
	}
	return total
}

// TestBrokerInflateBudget: MaxObjectBytes bounds what the copied objects inflate to, not only what they occupy.
// Eight valid 1 MiB blobs of zeros take a few kilobytes on disk, loose or packed; under a 4 MiB limit the broker
// refuses them instead of inflating 8 MiB, and the same objects pass under a limit that covers them.
func TestBrokerInflateBudget(t *testing.T) {
	const limit, blob, count = 4 << 20, 1 << 20, 8
	t.Run("loose", func(t *testing.T) {
		fx := newBrokerFixture(t)
		head := fx.commit("a.go", "package a\n")
		ids := bombBlobs(fx, count, blob)
		if on := looseBytes(t, fx.checkout, ids); on > limit/64 {
			t.Fatalf("control: the blobs take %d bytes on disk; they should be a bomb (far under %d)", on, limit)
		}
		req := fx.request()
		req.MaxObjectBytes = limit
		if _, err := fx.push(req); err == nil || !strings.Contains(err.Error(), "would inflate the object data") {
			t.Fatalf("Push() under a %d-byte limit = %v, want a refusal by the inflation budget", limit, err)
		}
		if got := fx.remoteBranch(); got != "" {
			t.Errorf("remote kew/fix = %s after a refusal", got)
		}
		req.MaxObjectBytes = 4 * count * blob
		if res, err := fx.push(req); err != nil || res.Commit != head {
			t.Fatalf("Push() under a limit that covers the objects = %+v, %v", res, err)
		}
		fx.requireStateClean()
	})
	t.Run("packed", func(t *testing.T) {
		fx := newBrokerFixture(t)
		head := fx.commit("a.go", "package a\n")
		ids := bombBlobs(fx, count, blob)
		cmd := exec.Command("git", "pack-objects", "--quiet", filepath.Join(fx.checkout, ".git", "objects", "pack", "pack"))
		cmd.Dir = fx.checkout
		cmd.Env = fx.env
		cmd.Stdin = strings.NewReader(strings.Join(ids, "\n") + "\n")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git pack-objects: %v", err)
		}
		for _, id := range ids {
			if err := os.Remove(filepath.Join(fx.checkout, ".git", "objects", id[:2], id[2:])); err != nil {
				t.Fatal(err)
			}
		}
		bombPack := filepath.Join(fx.checkout, ".git", "objects", "pack", "pack-"+strings.TrimSpace(string(out))+".pack")
		if st, err := os.Stat(bombPack); err != nil || st.Size() > limit/64 {
			t.Fatalf("control: the pack is %v bytes (%v); it should be a bomb", st.Size(), err)
		}
		req := fx.request()
		req.MaxObjectBytes = limit
		if _, err := fx.push(req); err == nil || !strings.Contains(err.Error(), "would inflate the object data") {
			t.Fatalf("Push() under a %d-byte limit = %v, want a refusal by the inflation budget", limit, err)
		}
		req.MaxObjectBytes = 4 * count * blob
		if res, err := fx.push(req); err != nil || res.Commit != head {
			t.Fatalf("Push() under a limit that covers the objects = %+v, %v", res, err)
		}
		fx.requireStateClean()
	})
}

// TestChargePackDelta: a delta's rebuilt size is charged, and an entry whose stream outgrows its declared size
// is refused without inflating it.
func TestChargePackDelta(t *testing.T) {
	entry := func(typ byte, size int, payload []byte) []byte {
		var b bytes.Buffer
		c := typ<<4 | byte(size&15)
		size >>= 4
		for size > 0 {
			b.WriteByte(c | 0x80)
			c = byte(size & 0x7f)
			size >>= 7
		}
		b.WriteByte(c)
		if typ == packRefDelta {
			b.Write(make([]byte, 20))
		}
		zw := zlib.NewWriter(&b)
		zw.Write(payload)
		zw.Close()
		return b.Bytes()
	}
	pack := func(entries ...[]byte) []byte {
		b := []byte{'P', 'A', 'C', 'K', 0, 0, 0, 2, 0, 0, 0, byte(len(entries))}
		for _, e := range entries {
			b = append(b, e...)
		}
		return b
	}
	// A 6-byte delta whose header says it rebuilds a 1 GiB object (base size 3, result 1<<30).
	delta := []byte{3, 0x80, 0x80, 0x80, 0x80, 0x04, 0}
	im := &objectImporter{limit: 1 << 20, inflated: 1 << 20}
	err := im.chargePack("p", bytes.NewReader(pack(entry(3, 3, []byte("abc")), entry(packRefDelta, len(delta), delta))))
	if _, ok := err.(*inflateLimitError); !ok {
		t.Errorf("chargePack(a delta rebuilding 1 GiB) under 1 MiB = %v, want an inflation refusal", err)
	}
	im = &objectImporter{limit: 1 << 20, inflated: 1 << 20}
	if err := im.chargePack("p", bytes.NewReader(pack(entry(3, 2, []byte("abc"))))); err == nil {
		t.Error("chargePack accepted an entry that inflates past its declared size")
	}
	im = &objectImporter{limit: 1 << 20, inflated: 1 << 20}
	if err := im.chargePack("p", bytes.NewReader(pack(entry(3, 3, []byte("abc")), entry(1, 5, []byte("hello"))))); err != nil {
		t.Errorf("chargePack(two small objects) = %v", err)
	}
	if want := int64(1<<20 - 8); im.inflated != want {
		t.Errorf("budget left %d, want %d", im.inflated, want)
	}
}
