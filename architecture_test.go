package kewplan_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/kewplan/kewplan/"

// archRow is one row of ARCHITECTURE.md's package table: the package and the kewplan packages it may import.
type archRow struct {
	pkg     string
	allowed []string // package paths relative to the module; "x/*" is every package under x; "anything"
	line    int
}

// readArchTable reads the package table of ARCHITECTURE.md, in its order.
func readArchTable(t *testing.T) []archRow {
	t.Helper()
	f, err := os.Open("ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []archRow
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		cells := strings.Split(sc.Text(), "|")
		if len(cells) != 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		row := archRow{pkg: strings.Trim(strings.TrimSpace(cells[1]), "`"), line: n}
		if allowed := strings.TrimSpace(cells[3]); allowed != "—" {
			for _, a := range strings.Split(allowed, ",") {
				row.allowed = append(row.allowed, strings.TrimSpace(a))
			}
		}
		rows = append(rows, row)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatal("ARCHITECTURE.md has no package table")
	}
	return rows
}

// importGraph is every package of the module with the module's packages it imports (not its tests').
func importGraph(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	graph := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		if fields[0] == strings.TrimSuffix(module, "/") {
			continue // this test's own package
		}
		graph[pkg] = []string{}
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, module) {
				graph[pkg] = append(graph[pkg], strings.TrimPrefix(imp, module))
			}
		}
	}
	return graph
}

// rowOf is the row that describes pkg: its own, or the nearest row of a parent ("internal/testtools" covers
// internal/testtools/testkit).
func rowOf(rows []archRow, pkg string) (int, bool) {
	for p := pkg; p != "." && p != "/"; p = path.Dir(p) {
		for i, r := range rows {
			if r.pkg == p {
				return i, true
			}
		}
	}
	return 0, false
}

func allows(r archRow, imp string) bool {
	for _, a := range r.allowed {
		switch {
		case a == "anything" || a == imp:
			return true
		case strings.HasSuffix(a, "/*") && strings.HasPrefix(imp, strings.TrimSuffix(a, "*")):
			return true
		}
	}
	return false
}

// checkArchitecture lists every way graph breaks the table: a package without a row, an import its row does not
// name, an import of a package whose row is below the importer's (an arrow pointing up), and an import of the
// test tools.
func checkArchitecture(rows []archRow, graph map[string][]string) []string {
	var problems []string
	pkgs := make([]string, 0, len(graph))
	for p := range graph {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, pkg := range pkgs {
		i, ok := rowOf(rows, pkg)
		if !ok {
			problems = append(problems, fmt.Sprintf("%s has no row in ARCHITECTURE.md's package table: add one saying its job and what it may import", pkg))
			continue
		}
		r := rows[i]
		for _, imp := range graph[pkg] {
			j, known := rowOf(rows, imp)
			switch {
			case strings.HasPrefix(imp, "internal/testtools") && !strings.HasPrefix(pkg, "internal/testtools"):
				problems = append(problems, fmt.Sprintf("%s imports the test tool %s; only tests may", pkg, imp))
			case rows[i].pkg == imp || (known && j == i):
				// a package of the same row (internal/testtools/k8stest and its siblings)
			case !allows(r, imp):
				problems = append(problems, fmt.Sprintf("%s imports %s, which its row (ARCHITECTURE.md:%d) does not allow", pkg, imp, r.line))
			case known && j > i:
				problems = append(problems, fmt.Sprintf("%s imports %s, whose row (ARCHITECTURE.md:%d) is below its own (ARCHITECTURE.md:%d): arrows point down the table", pkg, imp, rows[j].line, r.line))
			}
		}
	}
	return problems
}

// TestArchitectureImports keeps ARCHITECTURE.md true: every package has a row, and imports only what its row
// allows, from rows above it.
func TestArchitectureImports(t *testing.T) {
	rows := readArchTable(t)
	for _, p := range checkArchitecture(rows, importGraph(t)) {
		t.Error(p)
	}
}

// TestArchitectureRefusesAnArrow: the check fails on an import the table does not allow, on an arrow up the
// table, on a package without a row and on a test tool in the binary.
func TestArchitectureRefusesAnArrow(t *testing.T) {
	rows := readArchTable(t)
	graph := importGraph(t)
	if p := checkArchitecture(rows, graph); len(p) > 0 {
		t.Skipf("the real graph already breaks the table (TestArchitectureImports reports it): %v", p)
	}
	for _, tc := range []struct {
		name     string
		pkg, imp string
		want     string
	}{
		{"the planner importing the apply loop", "planner", "executor", "does not allow"},
		{"an engine importing the loop", "executor/docker", "executor", "does not allow"},
		{"a room importing the views", "executor/ledger", "views", "does not allow"},
		{"a test tool in the binary", "executor", "internal/testtools/testkit", "test tool"},
		{"a package without a row", "newroom", "config", "has no row"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := map[string][]string{}
			for k, v := range graph {
				g[k] = slices.Clone(v)
			}
			g[tc.pkg] = append(g[tc.pkg], tc.imp)
			problems := checkArchitecture(rows, g)
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tc.want) }) {
				t.Errorf("adding %s -> %s: problems %q, want one saying %q", tc.pkg, tc.imp, problems, tc.want)
			}
		})
	}
	// An arrow up the table, allowed by a row by mistake, is refused too.
	up := slices.Clone(rows)
	for i := range up {
		if up[i].pkg == "config" {
			up[i].allowed = append(slices.Clone(up[i].allowed), "planner")
		}
	}
	g := map[string][]string{}
	for k, v := range graph {
		g[k] = slices.Clone(v)
	}
	g["config"] = append(g["config"], "planner")
	if problems := checkArchitecture(up, g); !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, "arrows point down") }) {
		t.Errorf("config -> planner allowed by its row: problems %q, want an arrow pointing up", problems)
	}
}
