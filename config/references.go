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
)

// refScope says which reference roots an expression may use.
type refScope struct {
	where string // for messages: "a node", "a local value", ...
	node  bool   // node.<name>.<output>
	local bool   // local.<name>
	model bool   // model (runner args only)
}

// checkStatic runs the checks that need the whole configuration: references, local value cycles, function
// names, dependencies, and the types and values of node attributes that do not depend on variables.
func (c *Config) checkStatic() hcl.Diagnostics {
	var diags hcl.Diagnostics
	nodeScope := refScope{where: "a node", node: true, local: true}
	for _, name := range slices.Sorted(maps.Keys(c.Nodes)) {
		n := c.Nodes[name]
		for _, an := range slices.Sorted(maps.Keys(n.Attrs)) {
			if an == "depends_on" {
				continue
			}
			diags = append(diags, c.checkExpr(n.Attrs[an].Expr, nodeScope)...)
		}
		if pr := n.PullRequest; pr != nil {
			for _, e := range []hcl.Expression{pr.Base, pr.Title} {
				if e != nil {
					diags = append(diags, c.checkExpr(e, nodeScope)...)
				}
			}
		}
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
	if !diags.HasErrors() {
		// Evaluating with unresolved references would only repeat them as evaluation errors.
		diags = append(diags, c.checkStaticValues()...)
	}
	return diags
}

// checkExpr reports references and function calls that cannot resolve.
func (c *Config) checkExpr(expr hcl.Expression, scope refScope) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, trav := range expr.Variables() {
		if d := c.checkTraversal(trav, scope); d != nil {
			diags = append(diags, d)
		}
	}
	if syn, ok := expr.(hclsyntax.Expression); ok {
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
		if len(trav) > 2 {
			out, ok := step(2)
			if !ok || !contains(NodeOutputNames, out) {
				return errorDiag("Unsupported node output",
					fmt.Sprintf("A node has no output %q.%s The outputs of a node are %s.", out, didYouMean(out, NodeOutputNames), quotedList(NodeOutputNames)),
					rng)
			}
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

	for _, n := range c.Nodes {
		refs := append([]NodeRef(nil), n.DependsOn...)
		var exprs []hcl.Expression
		for name, a := range n.Attrs {
			if name != "depends_on" {
				exprs = append(exprs, a.Expr)
			}
		}
		if pr := n.PullRequest; pr != nil {
			for _, e := range []hcl.Expression{pr.Base, pr.Title} {
				if e != nil {
					exprs = append(exprs, e)
				}
			}
		}
		for _, e := range exprs {
			for _, t := range e.Variables() {
				if len(t) < 2 {
					continue
				}
				a, ok := t[1].(hcl.TraverseAttr)
				if !ok {
					continue
				}
				switch t.RootName() {
				case "node":
					refs = append(refs, NodeRef{Name: a.Name, Range: t.SourceRange()})
				case "local":
					for _, dep := range nodesOfLocal(a.Name, map[string]bool{}) {
						refs = append(refs, NodeRef{Name: dep, Range: t.SourceRange()})
					}
				}
			}
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
				n.DependsOn[i].Explicit = n.DependsOn[i].Explicit || r.Explicit
				continue
			}
			index[r.Name] = len(n.DependsOn)
			n.DependsOn = append(n.DependsOn, r)
		}
		if len(n.DependsOn) == 0 {
			n.DependsOn = nil
		}
	}
}
