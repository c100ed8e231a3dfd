package jsonstream

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"testing"
)

// failingWriter fails every write after the first.
type failingWriter struct{ writes int }

func (w *failingWriter) Write(p []byte) (int, error) {
	w.writes++
	if w.writes > 1 {
		return 0, errors.New("disk full")
	}
	return len(p), nil
}

// TestIndentedListErrors: a failing writer or element stops the output and is reported, and a
// document without the empty list writes nothing.
func TestIndentedListErrors(t *testing.T) {
	type doc struct {
		Items []any `json:"items"`
	}
	elems := func(i int) any { return i }
	if err := IndentedList(&failingWriter{}, doc{Items: []any{}}, "items", 5*ListBatch, elems); err == nil || err.Error() != "disk full" {
		t.Errorf("failing writer: error %v, want disk full", err)
	}
	var out bytes.Buffer
	bad := func(i int) any {
		if i == ListBatch+3 {
			return math.NaN()
		}
		return i
	}
	if err := IndentedList(&out, doc{Items: []any{}}, "items", 3*ListBatch, bad); err == nil {
		t.Error("an element that does not encode: no error")
	}
	out.Reset()
	if err := IndentedList(&out, doc{Items: []any{1}}, "items", 3, elems); err == nil || out.Len() != 0 {
		t.Errorf("no empty list: error %v and %d bytes written, want an error and nothing", err, out.Len())
	}
}

// TestCompacting: the indented stream, compacted, is encoding/json's compact encoding (HTML characters unescaped,
// as Indented writes them), so that its digest is the
// digest of json.Marshal's bytes, strings with quotes, escapes and white space included.
func TestCompacting(t *testing.T) {
	type item struct {
		Name string   `json:"name"`
		Tags []string `json:"tags"`
	}
	type doc struct {
		Head  string         `json:"head"`
		Items []item         `json:"items"`
		Tail  map[string]int `json:"tail"`
	}
	elem := func(i int) any {
		return item{Name: fmt.Sprintf("n%d \"q\\\" \t x\n<&>", i), Tags: []string{" a ", "\\", ""}}
	}
	for _, n := range []int{0, 1, ListBatch + 2} {
		whole := doc{Head: "h \"{[ ", Items: []item{}, Tail: map[string]int{"k k": 1}}
		for i := 0; i < n; i++ {
			whole.Items = append(whole.Items, elem(i).(item))
		}
		var enc bytes.Buffer
		e := json.NewEncoder(&enc)
		e.SetEscapeHTML(false) // as Indented encodes
		if err := e.Encode(whole); err != nil {
			t.Fatal(err)
		}
		want := bytes.TrimSuffix(enc.Bytes(), []byte("\n"))
		var compact bytes.Buffer
		h := sha256.New()
		w := Compacting(io.MultiWriter(&compact, h))
		if err := IndentedList(w, doc{Head: whole.Head, Items: []item{}, Tail: whole.Tail}, "items", n, elem); err != nil {
			t.Fatal(err)
		}
		// Indented ends the document with a newline, which compacting drops like any white space.
		if got := compact.String(); got != string(want) {
			t.Errorf("%d items: compacted %.200q…, want %.200q…", n, got, want)
		}
		if sha256.Sum256(want) != [32]byte(h.Sum(nil)) {
			t.Errorf("%d items: digest differs", n)
		}
	}
}
