package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/kewplan/kewplan/internal/testtools/benchplan"
)

// TestParsePiecesSameBody: a file parsed in pieces, cut at every possible place, gives the body a whole parse
// gives (every token, expression and range), or nil, never a different body.
func TestParsePiecesSameBody(t *testing.T) {
	files := map[string]string{
		"blocks": "sandbox {\n  memory = \"4g\"\n}\nnode \"a\" {\n  runner = \"x\"\n  prompt = <<EOT\nhello ${var.x}\nEOT\n}\n\n# comment\nnode \"b\" {\n  prompt = \"é ${node.a.commit}\"\n}\n/* c */\nnode \"c\" {\n}\n",
		// Cuts inside a heredoc, a block comment and a nested block: their pieces do not parse on their own.
		"heredoc":  "node \"a\" {\n  prompt = <<EOT\nx\n}\nnode \"fake\" {\n}\nEOT\n}\nnode \"b\" {\n}\n",
		"comment":  "/*\n}\nnode \"fake\" {\n}\n*/\nnode \"a\" {\n}\n",
		"nested":   "node \"a\" {\n  retry {\n}\n}\nnode \"b\" {\n}\n",
		"bom":      "node \"a\" {\n}\n\xef\xbb\xbfnode \"b\" {\n}\n",
		"attrs":    "x = 1\nnode \"a\" {\n}\nx = 2\n",
		"crlf":     "node \"a\" {\r\n}\r\nnode \"b\" {\r\n}\r\n",
		"unclosed": "node \"a\" {\n}\nnode \"b\" {\n",
	}
	for _, dir := range []string{"testdata/valid-files", "testdata/error-files"} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), FileExtension) {
				continue
			}
			src, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			files[e.Name()] = string(src)
		}
	}
	if len(files) < 20 {
		t.Fatalf("only %d files to parse", len(files))
	}
	pieced := 0
	for name, src := range files {
		whole, diags := hclsyntax.ParseConfig([]byte(src), name, hcl.InitialPos)
		for _, size := range []int{1, 10, 50} {
			cuts := topLevelCuts([]byte(src), size)
			if len(cuts) == 0 {
				continue
			}
			got := parsePieces(name, []byte(src), cuts)
			if got == nil {
				continue
			}
			pieced++
			if len(diags) > 0 {
				t.Errorf("%s cut every %d bytes: pieces parse cleanly, the whole file has %s", name, size, diags.Error())
				continue
			}
			if !reflect.DeepEqual(whole.Body, got) {
				t.Errorf("%s cut every %d bytes at %v: the pieces' body differs from the whole file's", name, size, cuts)
			}
		}
	}
	if pieced < 10 {
		t.Errorf("only %d files were parsed in pieces; the test compares too little", pieced)
	}
}

// TestLoadLargeConfiguration loads configurations large enough to be parsed in pieces and checked in parallel
// (run it with -race), and checks what the parallel steps produce: every node, with its dependencies.
func TestLoadLargeConfiguration(t *testing.T) {
	for _, shape := range []string{"chain", "fanout"} {
		dir := t.TempDir()
		if err := benchplan.Write(dir, shape, 1000); err != nil {
			t.Fatal(err)
		}
		cfg, diags := Load(dir)
		if len(diags) > 0 {
			t.Fatalf("%s: %s", shape, diags.Error())
		}
		if len(cfg.Nodes) != 1000 {
			t.Fatalf("%s: %d nodes, want 1000", shape, len(cfg.Nodes))
		}
		for name, n := range cfg.Nodes {
			var want []string
			switch {
			case shape == "chain" && name != "n00000":
				var i int
				fmt.Sscanf(name, "n%05d", &i)
				want = []string{fmt.Sprintf("n%05d", i-1)}
			case shape == "fanout" && name == "review":
				want = make([]string, 0, 998)
				for i := 1; i < 999; i++ {
					want = append(want, fmt.Sprintf("n%05d", i))
				}
			case shape == "fanout" && name != "root":
				want = []string{"root"}
			}
			var got []string
			for _, d := range n.DependsOn {
				got = append(got, d.Name)
			}
			if !slices.Equal(want, got) {
				t.Errorf("%s: node %s depends on %v, want %v", shape, name, got, want)
			}
		}
	}
}
