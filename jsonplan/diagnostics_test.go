package jsonplan

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hcled"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// contextSources are files whose every offset TestBlockContext checks: the examples, and shapes that fool a
// scanner that does not follow strings, heredocs and comments.
func contextSources(t testing.TB) map[string][]byte {
	t.Helper()
	srcs := map[string][]byte{
		"heredoc.hcl":  []byte("node \"a\" {\n  prompt = <<EOT\n}\nnode \"fake\" {\n}\nEOT\n}\n\nsandbox {\n  memory = \"4g\"\n}\n"),
		"comment.hcl":  []byte("/* node \"c\" {\n}\n*/\nnode \"b\" { # {\n  repo = \"x\" // }\n}\nrunner \"r\" \"s\" {\n  x = \"${\"}\"}\"\n}\n"),
		"indent.hcl":   []byte("  node \"i\" {\n  retry {\n}\n}\nnode x {\n}\n"),
		"crlf.hcl":     []byte("node \"d\" {\r\n  repo = \"y\"\r\n}\r\n\r\nnode \"e\" {}\r\n"),
		"attr.hcl":     []byte("model = \"x\"\nnode \"f\" {\n  nested {\n    z = 1\n  }\n}\n"),
		"template.hcl": []byte("node \"g\" {\n  prompt = <<-EOT\n    %{ for x in [1] }\n}\n    %{ endfor }\n    EOT\n}\nnode \"h\" { a = \"}\" }\n"),
	}
	names, _ := filepath.Glob(filepath.Join("..", "examples", "*.hcl"))
	for _, name := range names {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		srcs[filepath.Base(name)] = src
	}
	return srcs
}

// Every offset of every file: where the one-block parse answers, it answers what hcled says of the whole file's
// parse, and it answers for every offset inside a top-level block that begins a line.
func TestBlockContext(t *testing.T) {
	for name, src := range contextSources(t) {
		f, diags := hclsyntax.ParseConfig(src, name, hcl.InitialPos)
		if diags.HasErrors() {
			t.Fatalf("%s: %s", name, diags.Error())
		}
		answered := 0
		for off := 0; off <= len(src); off++ {
			want := hcled.ContextString(f, off)
			got, ok := blockContext(name, src, off)
			if !ok {
				continue
			}
			answered++
			if got != want {
				t.Errorf("%s at byte %d: blockContext = %q, the whole file's context is %q", name, off, got, want)
			}
		}
		if answered == 0 && len(f.Body.(*hclsyntax.Body).Blocks) > 0 {
			t.Errorf("%s: blockContext answered for no offset; every snippet would parse the file whole", name)
		}
	}
}

// A diagnostic's snippet context in a large file is found without parsing the file: the bytes allocated do not
// grow with the file (a whole parse of this one allocates about 30 MB).
func TestBlockContextCost(t *testing.T) {
	var src []byte
	for i := 0; i < 2000; i++ {
		src = append(src, "node \"n\" {\n  runner = \"claude-code\"\n  repo   = \"https://github.com/acme/widgets.git\"\n  prompt = \"Continue from ${node.x.commit}.\"\n}\n\n"...)
	}
	off := len(src) - 20
	if c, ok := blockContext("big.hcl", src, off); !ok || c != `node "n"` {
		t.Fatalf("blockContext = %q, %v; want \"node \\\"n\\\"\", true", c, ok)
	}
	allocs := testing.AllocsPerRun(3, func() { blockContext("big.hcl", src, off) })
	if allocs > 200 {
		t.Errorf("blockContext of the last block of a %d-byte file made %.0f allocations; want at most 200 (one block's parse)", len(src), allocs)
	}
}

// FuzzBlockContext: for any source the parser takes without a diagnostic, the one-block answer, where there is
// one, is the whole file's.
func FuzzBlockContext(f *testing.F) {
	for _, src := range contextSources(f) {
		f.Add(src, 0)
		f.Add(src, len(src)/2)
	}
	f.Fuzz(func(t *testing.T, src []byte, off int) {
		if off < 0 || off > len(src) || len(src) > 1<<14 {
			return
		}
		file, diags := hclsyntax.ParseConfig(src, "x.hcl", hcl.InitialPos)
		if file == nil || len(diags) > 0 {
			return
		}
		if got, ok := blockContext("x.hcl", src, off); ok {
			if want := hcled.ContextString(file, off); got != want {
				t.Fatalf("blockContext at %d = %q, the whole file's context is %q", off, got, want)
			}
		}
	})
}
