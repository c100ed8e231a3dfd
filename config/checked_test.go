package config

import (
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	"github.com/zclconf/go-cty/cty"
)

// TestCheckedValuesReused: an attribute whose references are as unknown at plan time as in the load-time check
// is not evaluated again, and every attribute whose references changed (a variable, a known node output, each,
// a file) is, so reuse never changes a value.
func TestCheckedValuesReused(t *testing.T) {
	cfg := loadString(t, `
variable "model" {
  type    = string
  default = "m"
}
node "a" {
  runner = "claude-code"
  model  = var.model
  repo   = "https://github.com/acme/a.git"
  prompt = file("task.md")
}
node "b" {
  runner = "claude-code"
  model  = upper("m")
  repo   = "https://github.com/acme/b.git"
  prompt = "After ${node.a.commit}."
}
node "c" {
  for_each = toset(["x"])
  runner = "claude-code"
  model  = "m"
  repo   = "https://github.com/acme/${each.key}.git"
  prompt = "Key ${each.key}."
}
`)
	reused := func(node string) []string {
		var names []string
		for _, name := range []string{"runner", "model", "repo", "prompt"} {
			if cfg.Nodes[node].checked[name] != nil {
				names = append(names, name)
			}
		}
		return names
	}
	// file() is unknown in the check but read at plan time, so its value is not kept; var.model, node.a.commit
	// and each.key are unknown in the check and may be known later, which comparing the references decides.
	for node, want := range map[string][]string{"a": {"runner", "model", "repo"}, "b": {"runner", "model", "repo", "prompt"}, "c": {"runner", "model", "repo", "prompt"}} {
		if diff := cmp.Diff(want, reused(node)); diff != "" {
			t.Errorf("node %s: kept values mismatch (-want +got):\n%s", node, diff)
		}
	}

	ctx, diags := cfg.EvalContext(&Scope{
		Vars:    map[string]cty.Value{"model": cty.StringVal("from-var")},
		Outputs: map[string]map[string]cty.Value{"a": {"commit": cty.StringVal("abc123")}},
		FS:      fstest.MapFS{"task.md": {Data: []byte("Do the task.")}},
	})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	got := map[string]*NodeValues{}
	for _, name := range []string{"a", "b"} {
		nv, d := EvalNode(cfg.Nodes[name], ctx)
		if d.HasErrors() {
			t.Fatal(d)
		}
		got[name] = nv
	}
	insts, d := EvalExpansion(cfg.Nodes["c"], ctx)
	if d.HasErrors() || len(insts) != 1 {
		t.Fatalf("expansion of c: %d instances, %s", len(insts), d)
	}
	nv, d := EvalInstance(cfg.Nodes["c"], insts[0], ctx)
	if d.HasErrors() {
		t.Fatal(d)
	}
	got["c"] = nv
	checks := []struct{ node, what, got, want string }{
		{"a", "model", got["a"].Model, "from-var"},
		{"a", "prompt", got["a"].Prompt, "Do the task."},
		{"b", "model", got["b"].Model, "M"},
		{"b", "prompt", got["b"].Prompt, "After abc123."},
		{"c", "repo", got["c"].Repo, "https://github.com/acme/x.git"},
		{"c", "prompt", got["c"].Prompt, "Key x."},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("node %s %s = %q, want %q", c.node, c.what, c.got, c.want)
		}
	}
}
