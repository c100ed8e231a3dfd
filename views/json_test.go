package views

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kewplan/kewplan/planner"
)

// TestWritePlanJSONStreamsSameBytes: streaming the nodes in parallel batches writes exactly the bytes of
// encoding the whole document at once, for lists shorter than, equal to and longer than a batch.
func TestWritePlanJSONStreamsSameBytes(t *testing.T) {
	for _, n := range []int{0, 1, 2, listBatch, listBatch + 1, 3*listBatch + 7} {
		doc := &PlanJSON{FormatVersion: "1", KewplanVersion: "test", ConfigDigest: "abc",
			Nodes: make([]NodeJSON, n), Exposure: map[string][]string{"KEY": {"a"}}}
		for i := range doc.Nodes {
			doc.Nodes[i] = NodeJSON{Name: fmt.Sprintf("n%d \"q\" <b>\n", i), Runner: "claude-code", DependsOn: []string{"<&>"},
				Prompt: planner.PromptDocument{SHA256: "00", Bytes: i}, Credentials: []string{},
				Instance: &planner.InstanceDoc{Node: "n", Key: i, Slug: "n"}}
		}
		var whole, streamed bytes.Buffer
		if err := writeIndentedJSON(&whole, doc); err != nil {
			t.Fatal(err)
		}
		if err := WritePlanJSON(&streamed, doc); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(whole.String(), streamed.String()); diff != "" {
			t.Errorf("%d nodes: WritePlanJSON mismatch (-whole +streamed):\n%s", n, diff)
		}
	}
}

// failingWriter fails every write after the first.
type failingWriter struct{ writes int }

func (w *failingWriter) Write(p []byte) (int, error) {
	w.writes++
	if w.writes > 1 {
		return 0, errors.New("disk full")
	}
	return len(p), nil
}

// TestWriteIndentedJSONListErrors: a failing writer or element stops the output and is reported, and a
// document without the empty list writes nothing.
func TestWriteIndentedJSONListErrors(t *testing.T) {
	type doc struct {
		Items []any `json:"items"`
	}
	elems := func(i int) any { return i }
	if err := writeIndentedJSONList(&failingWriter{}, doc{Items: []any{}}, "items", 5*listBatch, elems); err == nil || err.Error() != "disk full" {
		t.Errorf("failing writer: error %v, want disk full", err)
	}
	var out bytes.Buffer
	bad := func(i int) any {
		if i == listBatch+3 {
			return math.NaN()
		}
		return i
	}
	if err := writeIndentedJSONList(&out, doc{Items: []any{}}, "items", 3*listBatch, bad); err == nil {
		t.Error("an element that does not encode: no error")
	}
	out.Reset()
	if err := writeIndentedJSONList(&out, doc{Items: []any{1}}, "items", 3, elems); err == nil || out.Len() != 0 {
		t.Errorf("no empty list: error %v and %d bytes written, want an error and nothing", err, out.Len())
	}
}
