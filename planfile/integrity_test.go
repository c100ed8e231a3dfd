package planfile

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/planner"
)

// TestNodesDigestStreamed: the streamed digest is the digest of the whole document's compact encoding, as plan
// files written before streaming recorded it, for every golden plan and for one without nodes.
func TestNodesDigestStreamed(t *testing.T) {
	goldens, _ := filepath.Glob("../planner/testdata/*/plan.json")
	if len(goldens) < 10 {
		t.Fatalf("only %d golden plans found", len(goldens))
	}
	docs := []*jsonplan.Document{{FormatVersion: "1"}}
	for _, g := range goldens {
		data, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		var doc jsonplan.Document
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatalf("%s: %v", g, err)
		}
		doc.Saved = &jsonplan.SavedState{ConfigPath: "elsewhere"} // left out of the digest
		docs = append(docs, &doc)
	}
	for i, doc := range docs {
		c := *doc
		c.Saved = nil
		var whole bytes.Buffer
		enc := json.NewEncoder(&whole)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(&c); err != nil {
			t.Fatal(err)
		}
		got, err := nodesDigest(doc)
		if err != nil {
			t.Fatal(err)
		}
		if want := planner.SHA256Hex(whole.Bytes()); got != want {
			t.Errorf("document %d (%d nodes): streamed digest %s, whole %s", i, len(doc.Nodes), got, want)
		}
	}
}
