// Package golden compares a test's output with its golden file under testdata, or rewrites the file when
// KEWPLAN_UPDATE=1 is set, so that output changes are reviewed in diffs. It imports no kewplan package, so any
// package's tests may use it.
package golden

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Updating reports whether golden files are being rewritten (KEWPLAN_UPDATE=1).
func Updating() bool { return os.Getenv("KEWPLAN_UPDATE") != "" }

// Golden compares got with the file at path, or writes it when KEWPLAN_UPDATE is set. A difference fails the test
// with both texts.
func Check(t testing.TB, path string, got []byte) {
	t.Helper()
	if Updating() {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (KEWPLAN_UPDATE=1 writes it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s mismatch (-want +got; KEWPLAN_UPDATE=1 rewrites it):\n%s", path, diff)
	}
}
