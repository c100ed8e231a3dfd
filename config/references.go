package config

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/kewplan/kewplan/internal/parallel"
)

// refScope says which reference roots an expression may use.
type refScope struct {
	where string // for messages: "a node", "a local value", ...
	node  bool   // node.<name>.<output>
	local bool   // local.<name>
	model bool   // model (runner args only)
	each  bool   // each.key, each.value (a node with for_each)
	count bool   // count.index (a node with count)
}

// checkStatic runs the checks that need the whole configuration: references, local value cycles, function
// names and dependencies. CheckValues, Load's last check, evaluates what references resolve to.
func (c *Config) checkStatic() hcl.Diagnostics {
	var diags hcl.Diagnostics
	// Each node's references are checked on their own, so in parallel; the diagnostics keep name order.
	names := slices.Sorted(maps.Keys(c.Nodes))
	perNode := make([]hcl.Diagnostics, len(names))
	parallel.For(len(names), func(i int) { perNode[i] = c.checkNodeReferences(c.Nodes[names[i]]) })
	for _, d := range perNode {
		diags = append(diags, d...)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Locals)) {
		diags = append(diags, c.checkExpr(c.Locals[name].Expr, refScope{where: "a local value", node: true, local: true})...)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Variables)) {
		for _, vv := range c.Variables[name].Validations {
			diags = append(diags, c.checkExpr(vv.Condition, refScope{where: "a variable validation"})...)
			diags = append(diags, c.checkExpr(vv.ErrorMessage, refScope{where: "a variable validation"})...)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Runners)) {
		if r := c.Runners[name]; r.Args != nil {
			diags = append(diags, c.checkExpr(r.Args, refScope{where: "a runner's args", local: true, model: true})...)
		}
	}
	diags = append(diags, c.checkLocalCycles()...)
	c.collectDependencies()
	// The references were walked for these checks; planning reads few of them again, and a large plan needs the
	// memory more.
	for _, n := range c.Nodes {
		n.vars = nil
	}
	return diags
}

// checkNodeReferences checks the references and function calls of a node's attributes, by attribute name.
func (c *Config) checkNodeReferences(n *Node) hcl.Diagnostics {
	var diags hcl.Diagnostics
	nodeScope := refScope{where: "a node", node: true, local: true, each: n.ForEach != nil, count: n.Count != nil}
	for _, an := range nodeArguments {
		if n.Attrs[an] == nil {
			continue
		}
		switch an {
		case "depends_on":
			diags = append(diags, c.checkDependsOn(n)...)
			continue
		case "for_each", "count":
			// The instances are what each and count describe, so the argument that makes them cannot use them.
			e := n.Attrs[an].Expr
			diags = append(diags, c.checkExprRefs(e, n.variables(e), refScope{where: "the " + an + " argument", node: true, local: true})...)
			continue
		}
		e := n.Attrs[an].Expr
		diags = append(diags, c.checkExprRefs(e, n.variables(e), nodeScope)...)
	}
	if pr := n.PullRequest; pr != nil {
		for _, e := range []hcl.Expression{pr.Base, pr.Title} {
			if e != nil {
				diags = append(diags, c.checkExprRefs(e, n.variables(e), nodeScope)...)
			}
		}
	}
	return diags
}

// checkExpr reports references and function calls that cannot resolve.
func (c *Config) checkExpr(expr hcl.Expression, scope refScope) hcl.Diagnostics {
	return c.checkExprRefs(expr, expr.Variables(), scope)
}

// checkExprRefs is checkExpr with expr's references already known (Node.variables).
func (c *Config) checkExprRefs(expr hcl.Expression, vars []hcl.Traversal, scope refScope) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, trav := range vars {
		if d := c.checkTraversal(trav, scope); d != nil {
			diags = append(diags, d)
		}
	}
	if syn, ok := expr.(hclsyntax.Expression); ok && !isPlainExpr(syn) {
		hclsyntax.VisitAll(syn, func(n hclsyntax.Node) hcl.Diagnostics {
			call, ok := n.(*hclsyntax.FunctionCallExpr)
			if !ok {
				return nil
			}
			if _, known := functionNames[call.Name]; known {
				return nil
			}
			detail := fmt.Sprintf("There is no function named %q.%s", call.Name, didYouMean(call.Name, slices.Sorted(maps.Keys(functionNames))))
			if call.Name == "env" {
				detail = "There is no env() function: credentials never pass through the configuration as values. List the credential's name in a runner block's credentials instead, and kewplan forwards it from the environment by name."
			} else {
				detail += " See the list of functions in the README's configuration language section."
			}
			diags = append(diags, errorDiag("Call to unknown function", detail, call.NameRange))
			return nil
		})
	}
	return diags
}

func (c *Config) checkTraversal(trav hcl.Traversal, scope refScope) *hcl.Diagnostic {
	root := trav.RootName()
	rng := trav.SourceRange()
	step := func(i int) (string, bool) {
		if i >= len(trav) {
			return "", false
		}
		switch s := trav[i].(type) {
		case hcl.TraverseAttr:
			return s.Name, true
		case hcl.TraverseIndex:
			if s.Key.Type() == cty.String && s.Key.IsKnown() && !s.Key.IsNull() {
				return s.Key.AsString(), true
			}
		}
		return "", false
	}
	switch root {
	case "var":
		name, ok := step(1)
		if !ok {
			return errorDiag("Invalid reference", "A reference to a variable names it after var, for example var.model.", rng)
		}
		if _, ok := c.Variables[name]; !ok && !c.rejected["var."+name] {
			return errorDiag("Reference to undeclared input variable",
				fmt.Sprintf("No variable named %q is declared.%s Declare it with a variable %q { } block, or correct the name.", name, didYouMean(name, slices.Sorted(maps.Keys(c.Variables))), name),
				rng)
		}
	case "local":
		if !scope.local {
			return errorDiag("Reference not allowed here", fmt.Sprintf("Local values cannot be used in %s, which may refer only to var.<name>.", scope.where), rng)
		}
		name, ok := step(1)
		if !ok {
			return errorDiag("Invalid reference", "A reference to a local value names it after local, for example local.repo.", rng)
		}
		if _, ok := c.Locals[name]; !ok {
			return errorDiag("Reference to undeclared local value",
				fmt.Sprintf("No local value named %q is defined.%s Define it in a locals block, or correct the name.", name, didYouMean(name, slices.Sorted(maps.Keys(c.Locals)))),
				rng)
		}
	case "node":
		if !scope.node {
			return errorDiag("Reference not allowed here",
				fmt.Sprintf("Node outputs cannot be used in %s: they are known only after the node ran.", scope.where), rng)
		}
		name, ok := step(1)
		if !ok {
			return errorDiag("Invalid reference", "A reference to a node output names the node and the output, for example node.fix.commit.", rng)
		}
		if c.rejected["node."+name] {
			return nil
		}
		if _, ok := c.Nodes[name]; !ok {
			return errorDiag("Reference to undeclared node",
				fmt.Sprintf("No node named %q is declared.%s Declare it with a node %q { } block, or correct the name.", name, didYouMean(name, slices.Sorted(maps.Keys(c.Nodes))), name),
				rng)
		}
		return c.checkNodeInstanceRef(name, trav, rng)
	case "each":
		if !scope.each {
			return errorDiag(`Reference to "each" in context without for_each`,
				fmt.Sprintf(`The "each" object can be used only in a node block, and only when the "for_each" argument is set%s. Add for_each to the node, or refer to a value that does not depend on an instance.`, notIn(scope)),
				rng)
		}
		if name, ok := step(1); !ok || (name != "key" && name != "value") {
			return errorDiag(`Invalid "each" attribute`,
				fmt.Sprintf(`The "each" object does not have an attribute named %q. The supported attributes are each.key and each.value, the current key and value pair of the "for_each" attribute set.`, name),
				rng)
		}
	case "count":
		if !scope.count {
			return errorDiag(`Reference to "count" in non-counted context`,
				fmt.Sprintf(`The "count" object can be used only in a node block, and only when the "count" argument is set%s. Add count to the node, or refer to a value that does not depend on an instance.`, notIn(scope)),
				rng)
		}
		if name, ok := step(1); !ok || name != "index" {
			return errorDiag(`Invalid "count" attribute`,
				fmt.Sprintf(`The "count" object does not have an attribute named %q. The only supported attribute is count.index, which is the index of each instance of a node that has the "count" argument set.`, name),
				rng)
		}
	case "model":
		if !scope.model {
			return errorDiag("Reference not allowed here",
				fmt.Sprintf("model is bound only inside a runner block's args, to the model routed to the node; it cannot be used in %s. Write the model itself, or var.<name>.", scope.where),
				rng)
		}
	case "env":
		return errorDiag("Unknown reference",
			"There is no env object: credentials never pass through the configuration as values. List the credential's name in a runner block's credentials instead, and kewplan forwards it from the environment by name.",
			rng)
	default:
		roots := []string{"var", "local", "node"}
		starts := "var., local. or node."
		if scope.model {
			roots = append(roots, "model")
			starts = "var., local. or model"
		}
		return errorDiag("Unknown reference",
			fmt.Sprintf("%q is not something a configuration can refer to.%s References start with %s, for example var.model, local.repo or node.fix.commit. Quote the value if you meant a string.", root, didYouMean(root, roots), starts),
			rng)
	}
	return nil
}

// notIn says where an instance reference was found, unless that is an ordinary node argument.
func notIn(scope refScope) string {
	if scope.where == "a node" {
		return ""
	}
	return "; it cannot be used in " + scope.where
}

// checkNodeInstanceRef checks what follows node.<name>: an instance key when the node has for_each or count, and
// then an output or plan-time attribute.
func (c *Config) checkNodeInstanceRef(name string, trav hcl.Traversal, rng hcl.Range) *hcl.Diagnostic {
	target := c.Nodes[name]
	rest := trav[2:]
	if len(rest) == 0 {
		return nil
	}
	idx, isIndex := rest[0].(hcl.TraverseIndex)
	switch {
	case target.Expanded() && isIndex:
		wantNumber := target.Count != nil
		if k := idx.Key; !k.IsKnown() || k.IsNull() || (wantNumber && k.Type() != cty.Number) || (!wantNumber && k.Type() != cty.String) {
			example := fmt.Sprintf(`node.%s["key"]`, name)
			what := `"for_each" set, so its instances are named by string keys`
			if wantNumber {
				example, what = fmt.Sprintf("node.%s[0]", name), `"count" set, so its instances are numbered from 0`
			}
			return errorDiag("Invalid node instance key",
				fmt.Sprintf("Node %q has %s; refer to one as %s.", name, what, example), rng)
		}
		rest = rest[1:]
	case target.Expanded():
		arg, example := "for_each", fmt.Sprintf(`node.%s["api"].commit, or from all of them, such as values(node.%s)[*].commit`, name, name)
		if target.Count != nil {
			arg, example = "count", fmt.Sprintf("node.%s[0].commit, or from all of them, such as node.%s[*].commit", name, name)
		}
		return errorDiag("Missing node instance key",
			fmt.Sprintf(`Because node %q has %q set, its outputs must be read from a specific instance, such as %s.`, name, arg, example), rng)
	case isIndex && idx.Key.Type() == cty.Number:
		return errorDiag("Unexpected node instance key",
			fmt.Sprintf(`Because node %q has neither "count" nor "for_each" set, references to it must not include an index key. Remove the bracketed index to refer to the single instance of this node.`, name), rng)
	}
	if len(rest) == 0 {
		return nil
	}
	var out string
	ok := false
	switch s := rest[0].(type) {
	case hcl.TraverseAttr:
		out, ok = s.Name, true
	case hcl.TraverseIndex:
		if s.Key.Type() == cty.String && s.Key.IsKnown() && !s.Key.IsNull() {
			out, ok = s.Key.AsString(), true
		}
	}
	if !ok || !contains(nodeAttributeNames, out) {
		return errorDiag("Unsupported node output",
			fmt.Sprintf("A node has no output %q.%s The outputs of a node are %s.", out, didYouMean(out, nodeAttributeNames), quotedList(nodeAttributeNames)),
			rng)
	}
	return nil
}

// checkDependsOn reports depends_on entries naming an instance of a node that is not expanded, or with the
// wrong kind of key.
func (c *Config) checkDependsOn(n *Node) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, ref := range n.DependsOn {
		if !ref.Explicit || len(ref.Keys) == 0 || c.Nodes[ref.Name] == nil {
			continue
		}
		trav := hcl.Traversal{hcl.TraverseRoot{Name: "node"}, hcl.TraverseAttr{Name: ref.Name}, hcl.TraverseIndex{Key: ref.Keys[0]}}
		if d := c.checkNodeInstanceRef(ref.Name, trav, ref.Range); d != nil {
			if !c.Nodes[ref.Name].Expanded() && ref.Keys[0].Type() == cty.String {
				d = errorDiag("Unexpected node instance key",
					fmt.Sprintf(`Because node %q has neither "count" nor "for_each" set, depends_on must name it without an index key: node.%s.`, ref.Name, ref.Name), ref.Range)
			}
			diags = append(diags, d)
		}
	}
	return diags
}

// isPlainExpr reports whether e is a literal, a reference, or a template of literals and references: what most
// attributes are, and what holds no function call, index expression or scope of its own to walk for.
func isPlainExpr(e hclsyntax.Expression) bool {
	switch e := e.(type) {
	case *hclsyntax.LiteralValueExpr, *hclsyntax.ScopeTraversalExpr:
		return true
	case *hclsyntax.TemplateWrapExpr:
		return isPlainExpr(e.Wrapped)
	case *hclsyntax.TemplateExpr:
		for _, part := range e.Parts {
			switch part.(type) {
			case *hclsyntax.LiteralValueExpr, *hclsyntax.ScopeTraversalExpr:
			default:
				return false
			}
		}
		return true
	}
	return false
}

// refersToNodeOrLocal reports whether a traversal starts at node or local.
func refersToNodeOrLocal(vars []hcl.Traversal) bool {
	for _, t := range vars {
		if r := t.RootName(); r == "node" || r == "local" {
			return true
		}
	}
	return false
}

// traversalString renders a traversal as written, e.g. "var.model" or `node["fix"].commit`.
func traversalString(t hcl.Traversal) string {
	var b strings.Builder
	for _, s := range t {
		switch st := s.(type) {
		case hcl.TraverseRoot:
			b.WriteString(st.Name)
		case hcl.TraverseAttr:
			b.WriteString("." + st.Name)
		case hcl.TraverseIndex:
			if st.Key.Type() == cty.String && st.Key.IsKnown() {
				fmt.Fprintf(&b, "[%q]", st.Key.AsString())
			} else if st.Key.Type() == cty.Number && st.Key.IsKnown() {
				b.WriteString("[" + st.Key.AsBigFloat().Text('f', -1) + "]")
			} else {
				b.WriteString("[...]")
			}
		case hcl.TraverseSplat:
			b.WriteString("[*]")
		}
	}
	return b.String()
}

// localRefs returns the local values an expression refers to.
func localRefs(expr hcl.Expression) []hcl.Traversal {
	var out []hcl.Traversal
	for _, t := range expr.Variables() {
		if t.RootName() == "local" && len(t) > 1 {
			if a, ok := t[1].(hcl.TraverseAttr); ok && a.Name != "" {
				out = append(out, t)
			}
		}
	}
	return out
}

func localRefName(t hcl.Traversal) string { return t[1].(hcl.TraverseAttr).Name }

// localOrder returns the locals in an order where each comes after the locals it refers to, and the names
// that sit on a cycle (left out of the order).
func (c *Config) localOrder() (order []string, cyclic map[string]bool) {
	const (
		unvisited = iota
		visiting
		done
	)
	state := map[string]int{}
	cyclic = map[string]bool{}
	var stack []string
	var visit func(name string)
	visit = func(name string) {
		switch state[name] {
		case done:
			return
		case visiting:
			for i := len(stack) - 1; i >= 0; i-- {
				cyclic[stack[i]] = true
				if stack[i] == name {
					break
				}
			}
			return
		}
		state[name] = visiting
		stack = append(stack, name)
		l := c.Locals[name]
		for _, t := range localRefs(l.Expr) {
			if dep := localRefName(t); c.Locals[dep] != nil {
				visit(dep)
			}
		}
		stack = stack[:len(stack)-1]
		state[name] = done
		if !cyclic[name] {
			order = append(order, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Locals)) {
		visit(name)
	}
	// A local that depends on a cyclic one cannot be evaluated either, but it is not itself on the cycle: it
	// evaluates to an unknown value, and only the cycle is reported.
	return order, cyclic
}

func (c *Config) checkLocalCycles() hcl.Diagnostics {
	_, cyclic := c.localOrder()
	if len(cyclic) == 0 {
		return nil
	}
	var diags hcl.Diagnostics
	names := slices.Sorted(maps.Keys(cyclic))
	reported := map[string]bool{}
	for _, name := range names {
		if reported[name] {
			continue
		}
		// Walk the cycle from name to render it in reference order.
		chain := []string{name}
		cur := name
		for {
			next := ""
			for _, t := range localRefs(c.Locals[cur].Expr) {
				if dep := localRefName(t); cyclic[dep] {
					next = dep
					break
				}
			}
			if next == "" || next == name || contains(chain, next) {
				chain = append(chain, name)
				break
			}
			chain = append(chain, next)
			cur = next
		}
		for _, n := range chain {
			reported[n] = true
		}
		parts := make([]string, len(chain))
		for i, n := range chain {
			parts[i] = "local." + n
		}
		diags = append(diags, errorDiag("Cycle in local values",
			fmt.Sprintf("The local values refer to each other in a cycle: %s. A local value cannot depend on itself; break the cycle by writing one of them without the reference.", strings.Join(parts, " -> ")),
			c.Locals[name].DeclRange))
	}
	return diags
}

// collectDependencies fills each node's DependsOn: explicit depends_on entries, plus every node named by a
// reference in the node's attributes, directly or through local values.
func (c *Config) collectDependencies() {
	localNodes := map[string][]string{}
	var nodesOfLocal func(name string, seen map[string]bool) []string
	nodesOfLocal = func(name string, seen map[string]bool) []string {
		if r, ok := localNodes[name]; ok {
			return r
		}
		if seen[name] || c.Locals[name] == nil {
			return nil
		}
		seen[name] = true
		var out []string
		for _, t := range c.Locals[name].Expr.Variables() {
			switch t.RootName() {
			case "node":
				if len(t) > 1 {
					if a, ok := t[1].(hcl.TraverseAttr); ok {
						out = append(out, a.Name)
					}
				}
			case "local":
				if len(t) > 1 {
					if a, ok := t[1].(hcl.TraverseAttr); ok {
						out = append(out, nodesOfLocal(a.Name, seen)...)
					}
				}
			}
		}
		localNodes[name] = out
		return out
	}
	// Every local is resolved first, so that the nodes, each on its own, only read localNodes and can be done in
	// parallel.
	for _, name := range slices.Sorted(maps.Keys(c.Locals)) {
		nodesOfLocal(name, map[string]bool{})
	}
	nodes := slices.Collect(maps.Values(c.Nodes))
	parallel.For(len(nodes), func(i int) { c.collectNodeDependencies(nodes[i], nodesOfLocal) })
}

// collectNodeDependencies fills one node's DependsOn (see collectDependencies).
func (c *Config) collectNodeDependencies(n *Node, nodesOfLocal func(string, map[string]bool) []string) {
	refs := append([]NodeRef(nil), n.DependsOn...)
	dependsOn := n.Attrs["depends_on"]
	for _, e := range n.expressions() {
		if dependsOn != nil && e == dependsOn.Expr {
			continue
		}
		if name, ok := isWholeNodeTraversal(e); ok && e == n.ForEach {
			// for_each = node.fix pairs the instances key by key.
			refs = append(refs, NodeRef{Name: name, Range: e.Range(), ForEach: true})
			continue
		}
		refs = append(refs, c.exprNodeRefs(e, n.variables(e), nodesOfLocal)...)
	}
	sort.SliceStable(refs, func(i, j int) bool {
		a, b := refs[i].Range, refs[j].Range
		if a.Filename != b.Filename {
			return a.Filename < b.Filename
		}
		return a.Start.Byte < b.Start.Byte
	})
	index := map[string]int{}
	n.DependsOn = n.DependsOn[:0]
	for _, r := range refs {
		if i, ok := index[r.Name]; ok {
			d := &n.DependsOn[i]
			d.Explicit = d.Explicit || r.Explicit
			d.Whole = d.Whole || r.Whole
			d.ForEach = d.ForEach || r.ForEach
			d.Keys = append(d.Keys, r.Keys...)
			d.KeyExprs = append(d.KeyExprs, r.KeyExprs...)
			continue
		}
		index[r.Name] = len(n.DependsOn)
		n.DependsOn = append(n.DependsOn, r)
	}
	if len(n.DependsOn) == 0 {
		n.DependsOn = nil
	}
}

// exprNodeRefs returns the nodes an expression refers to: by instance when the reference names one (a literal key,
// or an index expression that does not itself refer to a node), as a whole otherwise. Nodes reached through local
// values are referred to as a whole.
func (c *Config) exprNodeRefs(e hcl.Expression, vars []hcl.Traversal, nodesOfLocal func(string, map[string]bool) []string) []NodeRef {
	var refs []NodeRef
	add := func(t hcl.Traversal) {
		if len(t) < 2 {
			return
		}
		a, ok := t[1].(hcl.TraverseAttr)
		if !ok {
			return
		}
		switch t.RootName() {
		case "node":
			ref := NodeRef{Name: a.Name, Range: t.SourceRange(), Whole: true}
			if target := c.Nodes[a.Name]; target != nil && target.Expanded() && len(t) > 2 {
				if idx, ok := t[2].(hcl.TraverseIndex); ok && idx.Key.IsKnown() && !idx.Key.IsNull() {
					ref.Whole, ref.Keys = false, []cty.Value{idx.Key}
				}
			}
			refs = append(refs, ref)
		case "local":
			for _, dep := range nodesOfLocal(a.Name, map[string]bool{}) {
				refs = append(refs, NodeRef{Name: dep, Range: t.SourceRange(), Whole: true})
			}
		}
	}
	syn, ok := e.(hclsyntax.Expression)
	if !ok || !refersToNodeOrLocal(vars) || isPlainExpr(syn) {
		// Without a node or local reference, add finds nothing to add; in a plain expression every reference is
		// one of vars, in order, and there is no index expression: either way the walks below would add the same.
		for _, t := range vars {
			add(t)
		}
		return refs
	}
	// node.fix[each.key]: the collection is a traversal of the whole node, the key is evaluated per instance.
	indexed := map[*hclsyntax.ScopeTraversalExpr]hcl.Expression{}
	hclsyntax.VisitAll(syn, func(n hclsyntax.Node) hcl.Diagnostics {
		ie, ok := n.(*hclsyntax.IndexExpr)
		if !ok {
			return nil
		}
		coll, ok := ie.Collection.(*hclsyntax.ScopeTraversalExpr)
		if !ok || len(coll.Traversal) != 2 || coll.Traversal.RootName() != "node" {
			return nil
		}
		for _, t := range ie.Key.Variables() {
			if r := t.RootName(); r == "node" || r == "local" {
				return nil
			}
		}
		indexed[coll] = ie.Key
		return nil
	})
	// Variables() honours for-expression scopes: a walk's traversal counts only if its root is free.
	bound := map[string]bool{}
	for _, t := range vars {
		bound[t.RootName()] = true
	}
	hclsyntax.VisitAll(syn, func(n hclsyntax.Node) hcl.Diagnostics {
		ste, ok := n.(*hclsyntax.ScopeTraversalExpr)
		if !ok || !bound[ste.Traversal.RootName()] {
			return nil
		}
		if key, ok := indexed[ste]; ok {
			if a, ok := ste.Traversal[1].(hcl.TraverseAttr); ok && c.Nodes[a.Name] != nil && c.Nodes[a.Name].Expanded() {
				refs = append(refs, NodeRef{Name: a.Name, Range: ste.Range(), KeyExprs: []hcl.Expression{key}})
				return nil
			}
		}
		add(ste.Traversal)
		return nil
	})
	return refs
}
