package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const hostileConfig = `
sandbox {
  memory = "4g"
  images = { claude-code = "kew-agent@sha256:0b7d5c8e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4" }
}

variable "model" {
  type    = string
  default = "claude-sonnet-4-5"
}

node "fix" {
  runner = "claude-code"
  model  = var.model
  repo   = "https://github.com/acme/widgets.git"
  prompt = "Fix it."
  retry {
    attempts = 2
  }
}
`

// hostile is what a plan file from a pull request may carry: an OSC title change ended by BEL, then a screen clear.
const hostile = "\x1b]0;pwned\x07\x1b[2J\u009b31m\u202e"

// stringLeaves lists the path of every string value and map key of a decoded JSON value, in a stable order.
func stringLeaves(v any, at []any, out *[][]any) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := append(append([]any{}, at...), k)
			*out = append(*out, append(append([]any{}, p...), keyMarker{}))
			stringLeaves(x[k], p, out)
		}
	case []any:
		for i := range x {
			stringLeaves(x[i], append(append([]any{}, at...), i), out)
		}
	case string:
		*out = append(*out, append([]any{}, at...))
	}
}

type keyMarker struct{}

// poison returns a deep copy of doc with the string (or map key) at path made hostile.
func poison(doc any, path []any) any {
	var cp any
	b, _ := json.Marshal(doc)
	_ = json.Unmarshal(b, &cp)
	var parent any
	cur := cp
	for i, step := range path {
		if _, ok := step.(keyMarker); ok {
			m := parent.(map[string]any)
			k := path[i-1].(string)
			m[k+hostile] = m[k]
			delete(m, k)
			return cp
		}
		parent = cur
		switch s := step.(type) {
		case string:
			cur = cur.(map[string]any)[s]
		case int:
			cur = cur.([]any)[s]
		}
	}
	last := path[len(path)-1]
	switch s := last.(type) {
	case string:
		parent.(map[string]any)[s] = cur.(string) + hostile
	case int:
		parent.([]any)[s] = cur.(string) + hostile
	}
	return cp
}

func pathString(path []any) string {
	var b strings.Builder
	for _, s := range path {
		switch s := s.(type) {
		case string:
			b.WriteString("." + s)
		case int:
			b.WriteString("[" + strconv.Itoa(s) + "]")
		case keyMarker:
			b.WriteString(" (key)")
		}
	}
	return b.String()
}

// TestHostilePlanFileFields: control characters in any field of a plan file given to show or diff reach the
// terminal escaped, in the plan, in its diff and in every error message about it.
func TestHostilePlanFileFields(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(hostileConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	saved := filepath.Join(dir, "saved.plan")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"plan", "--no-color", "--out", saved, filepath.Join(dir, "main.hcl")}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("plan: exit %d: %s", code, stderr.String())
	}
	zb, err := os.ReadFile(saved)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(zb))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(plain, &doc); err != nil {
		t.Fatal(err)
	}
	var paths [][]any
	stringLeaves(doc, nil, &paths)
	if len(paths) < 50 {
		t.Fatalf("only %d string fields found", len(paths))
	}
	edited := filepath.Join(dir, "edited.plan")
	// format_version with another major version is refused by an error that names it.
	other := poison(doc, []any{"format_version"}).(map[string]any)
	other["format_version"] = "2" + hostile
	variants := []any{other}
	for _, path := range paths {
		variants = append(variants, poison(doc, path))
	}
	for i, variant := range variants {
		path := []any{"format_version", " (another major version)"}
		if i > 0 {
			path = paths[i-1]
		}
		b, err := json.MarshalIndent(variant, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(edited, b, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"show", "--no-color", edited},
			{"diff", "--no-color", saved, edited},
			{"diff", "--no-color", edited, saved},
			{"diff", "--format", "markdown", saved, edited},
		} {
			var out, errOut bytes.Buffer
			run(args, strings.NewReader(""), &out, &errOut)
			for name, s := range map[string]string{"stdout": out.String(), "stderr": errOut.String()} {
				if strings.ContainsAny(s, "\x1b\x07\u009b\u202e") {
					t.Errorf("%s with %s poisoned: control characters on %s:\n%q", args[0], pathString(path), name, s)
				}
			}
		}
	}
}
