package views

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kewplan/kewplan/internal/jsonstream"
	"github.com/kewplan/kewplan/jsonplan"
)

// TestWritePlanJSONStreamsSameBytes: streaming the nodes in parallel batches writes exactly the bytes of
// encoding the whole document at once, for lists shorter than, equal to and longer than a batch.
func TestWritePlanJSONStreamsSameBytes(t *testing.T) {
	for _, n := range []int{0, 1, 2, jsonstream.ListBatch, jsonstream.ListBatch + 1, 3*jsonstream.ListBatch + 7} {
		doc := &jsonplan.Document{FormatVersion: "1", KewplanVersion: "test", ConfigDigest: "abc",
			Nodes: make([]jsonplan.NodeDocument, n), Exposure: map[string][]string{"KEY": {"a"}}}
		for i := range doc.Nodes {
			doc.Nodes[i] = jsonplan.NodeDocument{Name: fmt.Sprintf("n%d \"q\" <b>\n", i), Runner: "claude-code", DependsOn: []string{"<&>"},
				Prompt: jsonplan.PromptDocument{SHA256: "00", Bytes: i}, Credentials: []string{},
				Instance: &jsonplan.InstanceDoc{Node: "n", Key: i, Slug: "n"}}
		}
		var whole, streamed bytes.Buffer
		if err := jsonstream.Indented(&whole, doc); err != nil {
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
