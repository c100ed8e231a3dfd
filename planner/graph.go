package planner

import (
	"container/heap"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/kewplan/kewplan/config"
)

// graph is the dependency graph of a configuration's nodes, by index into names (sorted).
type graph struct {
	names []string
	index map[string]int
	nodes []*config.Node
	deps  [][]int            // node -> the nodes it depends on, deduplicated, in source order
	refs  [][]config.NodeRef // parallel to deps: where each dependency was named
	users [][]int            // node -> the nodes that depend on it
	// missing marks the nodes that depend on a node that does not exist: they cannot run.
	missing []bool
}

// newGraph indexes the nodes and reports dependencies on nodes that do not exist.
func newGraph(cfg *config.Config) (*graph, hcl.Diagnostics) {
	g := &graph{names: make([]string, 0, len(cfg.Nodes)), index: make(map[string]int, len(cfg.Nodes))}
	for name := range cfg.Nodes {
		g.names = append(g.names, name)
	}
	sort.Strings(g.names)
	g.nodes = make([]*config.Node, len(g.names))
	for i, name := range g.names {
		g.index[name] = i
		g.nodes[i] = cfg.Nodes[name]
	}
	g.deps = make([][]int, len(g.names))
	g.refs = make([][]config.NodeRef, len(g.names))
	g.users = make([][]int, len(g.names))
	g.missing = make([]bool, len(g.names))
	var diags hcl.Diagnostics
	// A node's DependsOn names each node once (config deduplicates it), so each dependency is added once.
	for i, n := range g.nodes {
		for _, ref := range n.DependsOn {
			j, ok := g.index[ref.Name]
			if !ok {
				detail := fmt.Sprintf("Node %q depends on %q, which is not declared.", n.Name, ref.Name)
				if s := suggest(ref.Name, g.names); s != "" {
					detail = fmt.Sprintf("Node %q depends on %q, which is not declared. Did you mean %q?", n.Name, ref.Name, s)
				}
				diags = append(diags, NewDiagnostic(RuleUnknownDependency, rangePtr(ref.Range), detail))
				g.missing[i] = true
				continue
			}
			g.deps[i] = append(g.deps[i], j)
			g.refs[i] = append(g.refs[i], ref)
			g.users[j] = append(g.users[j], i)
		}
	}
	return g, diags
}

// closure returns the named nodes and everything they depend on, as a selection mask.
func (g *graph) closure(targets []string) ([]bool, hcl.Diagnostics) {
	sel := make([]bool, len(g.names))
	var diags hcl.Diagnostics
	var stack []int
	for _, t := range targets {
		i, ok := g.index[t]
		if !ok {
			detail := fmt.Sprintf("--target names %q, which is not a node of this configuration.", t)
			if s := suggest(t, g.names); s != "" {
				detail += fmt.Sprintf(" Did you mean %q?", s)
			}
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unknown target", Detail: detail})
			continue
		}
		if !sel[i] {
			sel[i] = true
			stack = append(stack, i)
		}
	}
	for len(stack) > 0 {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, j := range g.deps[i] {
			if !sel[j] {
				sel[j] = true
				stack = append(stack, j)
			}
		}
	}
	return sel, diags
}

// nameHeap is a min-heap of node indexes; indexes follow name order, so the smallest index is the first name.
type nameHeap []int

func (h nameHeap) Len() int           { return len(h) }
func (h nameHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h nameHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *nameHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *nameHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// order sorts the selected nodes topologically (Kahn's algorithm with in-degree counts; among the nodes ready at
// once, the first name goes first). Nodes on or behind a cycle cannot be ordered: they follow, in name order,
// and each cycle is reported once. cyclic marks the nodes on a cycle.
func (g *graph) order(sel []bool) (order []int, cyclic []bool, diags hcl.Diagnostics) {
	indeg := make([]int, len(g.names))
	ready := nameHeap{}
	total := 0
	for i := range g.names {
		if !sel[i] {
			continue
		}
		total++
		indeg[i] = len(g.deps[i]) // a selection is closed under dependencies
		if indeg[i] == 0 {
			ready = append(ready, i)
		}
	}
	heap.Init(&ready)
	order = make([]int, 0, total)
	for ready.Len() > 0 {
		i := heap.Pop(&ready).(int)
		order = append(order, i)
		for _, u := range g.users[i] {
			if !sel[u] {
				continue
			}
			indeg[u]--
			if indeg[u] == 0 {
				heap.Push(&ready, u)
			}
		}
	}
	cyclic = make([]bool, len(g.names))
	if len(order) == total {
		return order, cyclic, nil
	}
	var rest []int
	for i := range g.names {
		if sel[i] && indeg[i] > 0 {
			rest = append(rest, i)
		}
	}
	for _, scc := range g.cycles(rest) {
		for _, i := range scc {
			cyclic[i] = true
		}
		diags = append(diags, g.cycleDiagnostic(scc))
	}
	return append(order, rest...), cyclic, diags
}

// cycles returns the strongly connected components among nodes that contain a cycle (Tarjan's algorithm, made
// iterative so a long cycle cannot exhaust the stack), each sorted, in order of their first name.
func (g *graph) cycles(nodes []int) [][]int {
	in := make(map[int]bool, len(nodes))
	for _, i := range nodes {
		in[i] = true
	}
	index := make(map[int]int, len(nodes))
	low := make(map[int]int, len(nodes))
	onStack := make(map[int]bool, len(nodes))
	var stack []int
	var out [][]int
	next := 0
	type frame struct{ v, edge int }
	for _, root := range nodes {
		if _, seen := index[root]; seen {
			continue
		}
		call := []frame{{v: root}}
		index[root], low[root] = next, next
		next++
		stack = append(stack, root)
		onStack[root] = true
		for len(call) > 0 {
			f := &call[len(call)-1]
			if f.edge < len(g.deps[f.v]) {
				w := g.deps[f.v][f.edge]
				f.edge++
				if !in[w] {
					continue
				}
				if _, seen := index[w]; !seen {
					index[w], low[w] = next, next
					next++
					stack = append(stack, w)
					onStack[w] = true
					call = append(call, frame{v: w})
				} else if onStack[w] && index[w] < low[f.v] {
					low[f.v] = index[w]
				}
				continue
			}
			v := f.v
			call = call[:len(call)-1]
			if len(call) > 0 {
				if p := call[len(call)-1].v; low[v] < low[p] {
					low[p] = low[v]
				}
			}
			if low[v] != index[v] {
				continue
			}
			var scc []int
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				scc = append(scc, w)
				if w == v {
					break
				}
			}
			if len(scc) > 1 || g.dependsOnItself(v) {
				sort.Ints(scc)
				out = append(out, scc)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

func (g *graph) dependsOnItself(v int) bool {
	for _, w := range g.deps[v] {
		if w == v {
			return true
		}
	}
	return false
}

// cycleDiagnostic names one shortest cycle through the component's first node, pointing at the reference that
// leaves that node.
func (g *graph) cycleDiagnostic(scc []int) *hcl.Diagnostic {
	in := make(map[int]bool, len(scc))
	for _, i := range scc {
		in[i] = true
	}
	start := scc[0]
	// Breadth-first search along dependencies, back to start.
	prev := map[int]int{}
	queue := []int{start}
	found := false
	for len(queue) > 0 && !found {
		v := queue[0]
		queue = queue[1:]
		for _, w := range g.deps[v] {
			if !in[w] {
				continue
			}
			if w == start {
				prev[start] = v
				found = true
				break
			}
			if _, seen := prev[w]; !seen {
				prev[w] = v
				queue = append(queue, w)
			}
		}
	}
	// Walk back from start to recover the path start -> ... -> start.
	path := []int{start}
	for v := prev[start]; v != start; v = prev[v] {
		path = append(path, v)
	}
	path = append(path, start)
	// path is reversed (start, last, ..., first, start): flip the middle.
	for i, j := 1, len(path)-2; i < j; i, j = i+1, j-1 {
		path[i], path[j] = path[j], path[i]
	}
	names := make([]string, len(path))
	for i, v := range path {
		names[i] = g.names[v]
	}
	var subject *hcl.Range
	for k, w := range g.deps[start] {
		if w == path[1] {
			subject = rangePtr(g.refs[start][k].Range)
			break
		}
	}
	detail := fmt.Sprintf("The nodes depend on each other in a cycle: %s.", strings.Join(names, " -> "))
	return NewDiagnostic(RuleDependencyCycle, subject, detail)
}

// suggest returns the candidate closest to name when it is plausibly a typo of it, else "".
func suggest(name string, candidates []string) string {
	best, bestDist := "", len(name)/3+2
	for _, c := range candidates {
		if d := editDistance(name, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, by bytes.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		if a == b {
			return 0
		}
		return max(len(a), len(b))
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
