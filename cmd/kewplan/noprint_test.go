package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommandsDoNotPrint keeps views the only printer: no command file writes to stdout or stderr itself. It
// scans the package's source (tests excepted) for fmt.Print*/Fprint*, the print builtins, io.WriteString and
// io.Copy, os.Stdout/os.Stderr outside main (which hands them to run), and the Env's Stdout/Stderr outside run
// (which builds the Env) and Env.streams (which hands them to the views).
func TestCommandsDoNotPrint(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	scanned := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		scanned++
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			ast.Inspect(fn, func(n ast.Node) bool {
				if msg := printsDirectly(fn.Name.Name, n); msg != "" {
					t.Errorf("%s: %s in %s: commands print through their view (package views)", fset.Position(n.Pos()), msg, fn.Name.Name)
				}
				return true
			})
		}
	}
	if scanned == 0 {
		t.Fatal("no command source scanned")
	}
}

// printsDirectly names what n does to write to a stream itself, or returns "".
func printsDirectly(fn string, n ast.Node) string {
	switch n := n.(type) {
	case *ast.CallExpr:
		if id, ok := n.Fun.(*ast.Ident); ok && (id.Name == "print" || id.Name == "println") {
			return id.Name + " called"
		}
		sel, ok := n.Fun.(*ast.SelectorExpr)
		if !ok {
			return ""
		}
		pkg, ok := sel.X.(*ast.Ident)
		if !ok {
			return ""
		}
		switch {
		case pkg.Name == "fmt" && (strings.HasPrefix(sel.Sel.Name, "Print") || strings.HasPrefix(sel.Sel.Name, "Fprint")):
			return "fmt." + sel.Sel.Name + " called"
		case pkg.Name == "io" && (sel.Sel.Name == "WriteString" || sel.Sel.Name == "Copy"):
			return "io." + sel.Sel.Name + " called"
		}
	case *ast.SelectorExpr:
		if n.Sel.Name != "Stdout" && n.Sel.Name != "Stderr" {
			return ""
		}
		if pkg, ok := n.X.(*ast.Ident); ok && pkg.Name == "os" {
			if fn != "main" {
				return "os." + n.Sel.Name + " used"
			}
			return ""
		}
		if fn != "run" && fn != "streams" {
			return n.Sel.Name + " used"
		}
	}
	return ""
}
