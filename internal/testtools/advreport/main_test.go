package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCatalogueCoversTheChecklist: every item of the security notes' §6 appears exactly once, in order.
func TestCatalogueCoversTheChecklist(t *testing.T) {
	var want []string
	for _, sec := range []struct {
		letter string
		n      int
	}{{"A", 21}, {"B", 5}, {"C", 12}, {"D", 8}, {"E", 5}, {"F", 22}, {"G", 3}, {"H", 5}, {"I", 3}, {"J", 11}, {"K", 3}, {"L", 2}, {"M", 6}, {"N", 3}} {
		for i := 1; i <= sec.n; i++ {
			want = append(want, fmt.Sprintf("%s%d", sec.letter, i))
		}
	}
	var got []string
	for _, it := range catalogue {
		got = append(got, it.ID)
		for _, test := range it.Tests {
			if pkg, name, ok := strings.Cut(test, "."); !ok || pkg == "" || !(strings.HasPrefix(name, "Test") || strings.HasPrefix(name, "Fuzz")) {
				t.Errorf("%s: test %q is not package.TestName", it.ID, test)
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("catalogue ids (-want +got):\n%s", diff)
	}
}

// TestRender: rows and named tests combine into one result per item; no evidence at all is a failure.
func TestRender(t *testing.T) {
	rows := map[string][]row{
		"A10": {{ID: "A10", Observed: "stored equals final", Pass: true}},
		"A17": {{ID: "A17", Observed: "left behind", Pass: false, Test: "TestAdvX"}},
		"C2":  {{ID: "C2", NotTried: "not here"}},
	}
	outcomes := map[string]string{"verdict.TestCollectVerdictSymlinks": "pass", "verdict.TestCollectVerdictFIFO": "fail"}
	var b bytes.Buffer
	failed := render(&b, rows, outcomes, false)
	out := b.String()
	for _, want := range []string{"A1   PASS", "A4   FAIL", "A10  PASS", "A17  FAIL", "C2   NOT TRIED", "A20  MISSING", "TestCollectVerdictFIFO FAILED"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if failed == 0 || !strings.Contains(out, fmt.Sprintf("%d failed", failed)) {
		t.Errorf("render() = %d failed; totals line:\n%s", failed, out[strings.LastIndex(out, "\n\n"):])
	}
}

// TestCatalogueNamesTestsThatRun: every test the catalogue names exists, in a package `make adversarial` runs
// (the Makefile's ADV_PKGS), so a renamed test or a package left out of the target cannot turn the table red
// unseen.
func TestCatalogueNamesTestsThatRun(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^ADV_PKGS \?=(.*)$`).FindSubmatch(makefile)
	if m == nil {
		t.Fatal("the Makefile sets no ADV_PKGS")
	}
	exists := map[string]bool{} // "package.TestName", package the last path element, as the catalogue names them
	collect := func(dir string) {
		files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range files {
			f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatalf("parse %s: %v", name, err)
			}
			for _, d := range f.Decls {
				if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil {
					exists[filepath.Base(dir)+"."+fn.Name.Name] = true
				}
			}
		}
	}
	for _, pkg := range strings.Fields(string(m[1])) {
		dir := filepath.Join(root, filepath.FromSlash(strings.TrimSuffix(pkg, "/...")))
		if !strings.HasSuffix(pkg, "/...") {
			collect(dir)
			continue
		}
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			if d.IsDir() {
				collect(p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, it := range catalogue {
		for _, test := range it.Tests {
			name, _, _ := strings.Cut(test, "/")
			if !exists[name] {
				t.Errorf("%s names %s, which is no test of a package in the Makefile's ADV_PKGS (%s)", it.ID, test, strings.TrimSpace(string(m[1])))
			}
		}
	}
}
