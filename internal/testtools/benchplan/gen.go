package benchplan

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Shapes are the configuration shapes Generate writes.
var Shapes = []string{"chain", "fanout", "foreach"}

// Generate returns a configuration of n containers:
//   - "chain": n nodes, each waiting for the previous one through a node output in its prompt;
//   - "fanout": one root, n-2 workers on it (depends_on), one reviewer on them all;
//   - "foreach": n/100 nodes with for_each over 100 keys each, every node after the first over the previous
//     node's instances (for_each = node.<prev>), so the instances chain key by key.
func Generate(shape string, n int) (string, error) {
	var b strings.Builder
	b.WriteString(`sandbox {
  memory = "4g"
  images = {
    claude-code = "kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4"
    opencode    = "kew-opencode@sha256:1c8e6d9f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5"
  }
}

variable "model" {
  type    = string
  default = "claude-sonnet-4-5"
}

`)
	runner := func(i int) string {
		if i%3 == 2 {
			return `runner = "opencode"
  model  = "moonshotai/kimi-k2"`
		}
		return `runner = "claude-code"
  model  = var.model`
	}
	switch shape {
	case "chain":
		for i := 0; i < n; i++ {
			prompt := `"Start the work."`
			if i > 0 {
				prompt = fmt.Sprintf(`"Continue from ${node.n%05d.commit}."`, i-1)
			}
			fmt.Fprintf(&b, "node \"n%05d\" {\n  %s\n  repo   = \"https://github.com/acme/widgets.git\"\n  prompt = %s\n}\n\n", i, runner(i), prompt)
		}
	case "fanout":
		fmt.Fprintf(&b, "node \"root\" {\n  %s\n  repo   = \"https://github.com/acme/widgets.git\"\n  prompt = \"Prepare.\"\n}\n\n", runner(0))
		var all []string
		for i := 1; i < n-1; i++ {
			name := fmt.Sprintf("n%05d", i)
			all = append(all, "node."+name)
			fmt.Fprintf(&b, "node %q {\n  %s\n  repo   = \"https://github.com/acme/widgets.git\"\n  prompt = \"Part %d.\"\n  depends_on = [node.root]\n}\n\n", name, runner(i), i)
		}
		fmt.Fprintf(&b, "node \"review\" {\n  runner = \"claude-code\"\n  role   = \"reviewer\"\n  model  = var.model\n  repo   = \"https://github.com/acme/widgets.git\"\n  prompt = \"Review everything.\"\n  depends_on = [%s]\n}\n", strings.Join(all, ", "))
	case "foreach":
		keys := make([]string, 100)
		for k := range keys {
			keys[k] = fmt.Sprintf("%q", fmt.Sprintf("svc%03d", k))
		}
		fmt.Fprintf(&b, "variable \"services\" {\n  type    = set(string)\n  default = [%s]\n}\n\n", strings.Join(keys, ", "))
		for i := 0; i < n/100; i++ {
			if i == 0 {
				fmt.Fprintf(&b, "node \"f%03d\" {\n  for_each = var.services\n  %s\n  repo   = \"https://github.com/acme/${each.key}.git\"\n  prompt = \"Start ${each.key}.\"\n}\n\n", i, runner(i))
				continue
			}
			fmt.Fprintf(&b, "node \"f%03d\" {\n  for_each = node.f%03d\n  %s\n  repo   = each.value.repo\n  ref    = each.value.commit\n  prompt = \"Continue ${each.key}.\"\n}\n\n", i, i-1, runner(i))
		}
	default:
		return "", fmt.Errorf("unknown shape %q (want one of %s)", shape, strings.Join(Shapes, ", "))
	}
	return b.String(), nil
}

// Write writes Generate(shape, n) to dir/main.hcl.
func Write(dir, shape string, n int) error {
	src, err := Generate(shape, n)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644)
}
