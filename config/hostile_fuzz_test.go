package config

import (
	"runtime/debug"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// hostileHCLSeeds are the hostile-input cases, seeded into the HCL fuzz targets.
var hostileHCLSeeds = []string{
	"locals {\n  a = " + strings.Repeat("(", 2000) + "1" + strings.Repeat(")", 2000) + "\n}\n",
	"locals {\n  a = " + strings.Repeat("!", 2000) + "true\n}\n",
	"locals {\n  a = " + strings.Repeat("true ? 1 : ", 2000) + "2\n}\n",
	strings.Repeat("b {\n", 2000),
	"locals {\n  a = <<EOT\n" + strings.Repeat("${", 2000) + "\nEOT\n}\n",
	"node \"fix\" {\n  runner = \"claude-code\"\n  model  = \"m\x1b[2J\x1b]0;PWNED\x07\"\n  repo = \"r\"\n  prompt = \"p\"\n}\n",
	"node \"fix\u202e\" {\n  runner = \"claude-code\u2066\"\n}\n",
	"locals {\n  a = \"\xff\xfe\"\n}\n",
	"policy {\n  allowed_image_prefixes = [\"\x1b[2J\"]\n}\n",
}

// limitStack makes a parser recursion that the nesting check failed to bound crash the fuzzer at once, instead
// of after a gigabyte of stack: 64 MiB is far more than MaxNesting levels need.
var limitStack = sync.OnceFunc(func() { debug.SetMaxStack(64 << 20) })

// FuzzCheckNesting: whatever CheckNesting accepts, the HCL parsers take without deep recursion (the limited stack
// turns a miss into a crash), and a refusal is a well-formed diagnostic.
func FuzzCheckNesting(f *testing.F) {
	for _, s := range hostileHCLSeeds {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Add([]byte("a = \"${x}\" # ((((\nb = <<-EOT\n  ((((\n  EOT\n"), false)
	f.Add([]byte("%{ if a }%{ for x in y }${x}%{ endfor }%{ endif }"), true)
	f.Fuzz(func(t *testing.T, src []byte, template bool) {
		limitStack()
		var d *hcl.Diagnostic
		if template {
			d = CheckTemplateNesting("t.tpl", src)
		} else {
			d = CheckNesting("x.hcl", src)
		}
		if d != nil {
			if d.Subject == nil || d.Subject.Start.Line < 1 || d.Subject.Start.Byte > len(src) {
				t.Fatalf("bad diagnostic range %v", d.Subject)
			}
			return
		}
		if template {
			hclsyntax.ParseTemplate(src, "t.tpl", hcl.InitialPos)
		} else {
			hclsyntax.ParseConfig(src, "x.hcl", hcl.InitialPos)
			hclsyntax.ParseExpression(src, "x.hcl", hcl.InitialPos)
		}
	})
}
