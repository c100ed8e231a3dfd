package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
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
