package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// MaxInstances bounds the instances of one node: a for_each over a huge map or a count of a billion would
// otherwise exhaust memory while planning, long before anything could be reviewed.
const MaxInstances = 100000

// Instance is one instance of a node: the node itself when it has neither for_each nor count, or one key of
// its for_each, or one index of its count.
type Instance struct {
	// Key is a cty.String for for_each, a cty.Number for count, and cty.NilVal for a node without either.
	Key cty.Value
	// Value is each.value (for_each only; cty.NilVal otherwise).
	Value cty.Value
	// Address names the instance in plans, targets and the ledger: "fix", `fix["api"]` or "shard[2]".
	Address string
	// Slug is Address made safe for a container name, a branch name and a file name (see InstanceSlug).
	Slug string
}

// unknownInstance is the instance EvalNode evaluates a node with for_each or count as: each and count unknown.
func unknownInstance(n *Node) *Instance {
	inst := &Instance{Address: n.Name, Slug: n.Name}
	if n.ForEach != nil {
		inst.Key, inst.Value = cty.UnknownVal(cty.String), cty.DynamicVal
	} else {
		inst.Key = cty.UnknownVal(cty.Number)
	}
	return inst
}

// Expanded reports whether the node has for_each or count, so that references to it name instances.
func (n *Node) Expanded() bool { return n.ForEach != nil || n.Count != nil }

// InstanceAddress renders an instance's address the way Terraform does: name, name["key"] or name[2].
func InstanceAddress(name string, key cty.Value) string {
	switch {
	case key == cty.NilVal:
		return name
	case key.Type() == cty.Number:
		return name + "[" + key.AsBigFloat().Text('f', -1) + "]"
	default:
		return name + "[" + strconv.Quote(key.AsString()) + "]"
	}
}

// ParseInstanceAddress splits an address written by a user (--target) into the node name and the instance key:
// "fix", `fix["api"]` or "shard[2]". The key is cty.NilVal when none is written.
func ParseInstanceAddress(s string) (name string, key cty.Value, err error) {
	open := strings.IndexByte(s, '[')
	if open < 0 {
		return s, cty.NilVal, nil
	}
	name, inner := s[:open], s[open+1:]
	if !strings.HasSuffix(inner, "]") {
		return "", cty.NilVal, fmt.Errorf("%q has no closing bracket; write an instance as fix[\"api\"] or shard[2]", s)
	}
	inner = inner[:len(inner)-1]
	if strings.HasPrefix(inner, `"`) {
		k, err := strconv.Unquote(inner)
		if err != nil {
			return "", cty.NilVal, fmt.Errorf("the key of %q is not a valid double-quoted string; write an instance as fix[\"api\"]", s)
		}
		return name, cty.StringVal(k), nil
	}
	i, err := strconv.ParseInt(inner, 10, 64)
	if err != nil || i < 0 {
		return "", cty.NilVal, fmt.Errorf("the key of %q is neither a double-quoted string nor an index; write an instance as fix[\"api\"] or shard[2]", s)
	}
	return name, cty.NumberIntVal(i), nil
}

// InstanceSlug is an instance's name where only [a-z0-9_-] may appear: the container is "kew-<slug>", the
// default branch "kew/<slug>", and log and checkout files are named after it. A for_each key that is already
// such a name is kept ("fix-api"); one that is not (upper case, spaces, dots, slashes, quotes, control
// characters) is escaped to dashes and followed by a short hash of the key ("fix-my-api-3f2a9c1d"), so two keys
// that escape alike still get two names. A slug is at most 59 characters, like a node name.
func InstanceSlug(name string, key cty.Value) string {
	switch {
	case key == cty.NilVal:
		return name
	case key.Type() == cty.Number:
		return fitSlug(name+"-"+key.AsBigFloat().Text('f', -1), name, key)
	}
	k := key.AsString()
	var b strings.Builder
	for _, r := range k {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_':
			b.WriteRune(r)
		case r >= 'A' && r <= 'Z':
			b.WriteRune(r + 'a' - 'A')
		default:
			if s := b.String(); s != "" && !strings.HasSuffix(s, "-") {
				b.WriteByte('-')
			}
		}
	}
	s := strings.Trim(b.String(), "-")
	if s == k && s != "" {
		return fitSlug(name+"-"+s, name, key)
	}
	if s == "" {
		return fitSlug(name+"-"+keyHash(name, k), name, key)
	}
	return fitSlug(name+"-"+s+"-"+keyHash(name, k), name, key)
}

// fitSlug shortens a slug over the length limit, keeping it unique with a hash of the name and the key.
func fitSlug(slug, name string, key cty.Value) string {
	if len(slug) <= maxNameLength {
		return slug
	}
	k := InstanceAddress("", key)
	return strings.TrimRight(slug[:maxNameLength-9], "-_") + "-" + keyHash(name, k)
}

func keyHash(name, key string) string {
	sum := sha256.Sum256([]byte(name + "\x00" + key))
	return hex.EncodeToString(sum[:4])
}

// describeAddress names an instance in a diagnostic: node "fix", or node fix["api"].
func describeAddress(addr string) string {
	if strings.ContainsRune(addr, '[') {
		return "node " + addr
	}
	return fmt.Sprintf("node %q", addr)
}

// InstanceContext returns ctx with each (for_each) or count (count) bound to inst; ctx itself when the node
// has neither.
func InstanceContext(ctx *hcl.EvalContext, n *Node, inst *Instance) *hcl.EvalContext {
	if inst == nil || inst.Key == cty.NilVal {
		return ctx
	}
	child := ctx.NewChild()
	if n.ForEach != nil {
		value := inst.Value
		if value == cty.NilVal {
			value = cty.DynamicVal
		}
		child.Variables = map[string]cty.Value{"each": cty.ObjectVal(map[string]cty.Value{"key": inst.Key, "value": value})}
	} else {
		child.Variables = map[string]cty.Value{"count": cty.ObjectVal(map[string]cty.Value{"index": inst.Key})}
	}
	return child
}

// EvalExpansion evaluates a node's for_each or count in ctx and returns its instances in key order (for_each:
// keys sorted lexically, as Terraform does; count: by index). A node without either has one instance, itself.
// Errors are worded as Terraform words them, at the argument's range.
func EvalExpansion(n *Node, ctx *hcl.EvalContext) ([]*Instance, hcl.Diagnostics) {
	return evalExpansion(n, ctx, false)
}

func evalExpansion(n *Node, ctx *hcl.EvalContext, static bool) ([]*Instance, hcl.Diagnostics) {
	switch {
	case n.ForEach != nil:
		return evalForEach(n, ctx, static)
	case n.Count != nil:
		return evalCount(n, ctx, static)
	}
	return []*Instance{{Address: n.Name, Slug: n.Name}}, nil
}

func forEachDiag(n *Node, detail string) hcl.Diagnostics {
	return hcl.Diagnostics{errorDiag("Invalid for_each argument", detail, n.ForEach.Range())}
}

func evalForEach(n *Node, ctx *hcl.EvalContext, static bool) ([]*Instance, hcl.Diagnostics) {
	v, diags := n.ForEach.Value(ctx)
	if diags.HasErrors() {
		return nil, diags
	}
	ty := v.Type()
	if v.IsMarked() || ((ty.IsSetType() || ty == cty.DynamicPseudoType) && v.IsKnown() && v.ContainsMarked()) {
		return nil, forEachDiag(n, `Sensitive values, or values derived from sensitive values, cannot be used as for_each arguments. If used, the sensitive value could be exposed as a node instance key, in the plan, the ledger and container names.`)
	}
	if v.IsNull() {
		return nil, forEachDiag(n, `The given "for_each" argument value is unsuitable: the given "for_each" argument value is null. A map, or set of strings is allowed.`)
	}
	switch {
	case ty.IsListType() || ty.IsTupleType():
		return nil, forEachDiag(n, fmt.Sprintf(`The given "for_each" argument value is unsuitable: the "for_each" argument must be a map, or set of strings, and you have provided a value of type %s. A list may hold the same string twice and has no keys of its own; if it holds unique strings, convert it with toset(), for example for_each = toset(var.services).`, ty.FriendlyName()))
	case ty.IsSetType() && !ty.ElementType().Equals(cty.String) && ty.ElementType() != cty.DynamicPseudoType:
		return nil, forEachDiag(n, fmt.Sprintf(`The given "for_each" argument value is unsuitable: the "for_each" argument must be a map, or set of strings, and you have provided a value of type %s.`, ty.FriendlyName()))
	case !(ty.IsMapType() || ty.IsObjectType() || ty.IsSetType() || ty == cty.DynamicPseudoType):
		return nil, forEachDiag(n, fmt.Sprintf(`The given "for_each" argument value is unsuitable: the "for_each" argument must be a map, or set of strings, and you have provided a value of type %s.`, ty.FriendlyName()))
	}
	if !v.IsKnown() || (ty.IsSetType() && !v.IsWhollyKnown()) {
		if static {
			return nil, nil
		}
		return nil, forEachDiag(n, unknownDetail(n.ForEach, "for_each", "the keys that identify the node's instances"))
	}
	if v.LengthInt() > MaxInstances {
		return nil, forEachDiag(n, fmt.Sprintf(`The given "for_each" argument value has %d elements; a node has at most %d instances. Split the work across several nodes.`, v.LengthInt(), MaxInstances))
	}
	insts := make([]*Instance, 0, v.LengthInt())
	for it := v.ElementIterator(); it.Next(); {
		k, ev := it.Element()
		if ty.IsSetType() {
			if ev.IsNull() {
				return nil, forEachDiag(n, `The given "for_each" argument value is unsuitable: "for_each" sets must not contain null values.`)
			}
			if ev.Type() != cty.String {
				return nil, forEachDiag(n, fmt.Sprintf(`The given "for_each" argument value is unsuitable: "for_each" supports maps and sets of strings, but you have provided a set containing %s.`, typeName(ev.Type())))
			}
			k = ev
		}
		insts = append(insts, &Instance{Key: k, Value: ev, Address: InstanceAddress(n.Name, k), Slug: InstanceSlug(n.Name, k)})
	}
	// Map and object keys iterate in lexical order already; a set of strings does too, but say so here.
	sort.SliceStable(insts, func(i, j int) bool { return insts[i].Key.AsString() < insts[j].Key.AsString() })
	return insts, diags
}

func evalCount(n *Node, ctx *hcl.EvalContext, static bool) ([]*Instance, hcl.Diagnostics) {
	v, diags := n.Count.Value(ctx)
	if diags.HasErrors() {
		return nil, diags
	}
	bad := func(detail string) ([]*Instance, hcl.Diagnostics) {
		return nil, hcl.Diagnostics{errorDiag("Invalid count argument", detail, n.Count.Range())}
	}
	if v.IsMarked() {
		v, _ = v.Unmark()
	}
	if v.IsNull() {
		return bad(`The given "count" argument value is null. An integer is required.`)
	}
	nv, err := convert.Convert(v, cty.Number)
	if err != nil {
		return bad(fmt.Sprintf(`The given "count" argument value is unsuitable: number required, but this value is %s.`, typeName(v.Type())))
	}
	if !nv.IsKnown() {
		if static {
			return nil, nil
		}
		return bad(unknownDetail(n.Count, "count", "how many instances the node has"))
	}
	bf := nv.AsBigFloat()
	i, acc := bf.Int64()
	switch {
	case acc != big.Exact || !bf.IsInt():
		return bad(fmt.Sprintf(`The given "count" argument value is unsuitable: %s is not a whole number. Write a whole number, for example count = 4.`, bf.Text('f', -1)))
	case i < 0:
		return bad(fmt.Sprintf(`The given "count" argument value is unsuitable: %d is negative; it must be greater than or equal to zero.`, i))
	case i > MaxInstances:
		return bad(fmt.Sprintf(`The given "count" argument value is %d; a node has at most %d instances. Split the work across several nodes.`, i, MaxInstances))
	}
	insts := make([]*Instance, i)
	for k := range insts {
		key := cty.NumberIntVal(int64(k))
		insts[k] = &Instance{Key: key, Address: InstanceAddress(n.Name, key), Slug: InstanceSlug(n.Name, key)}
	}
	return insts, diags
}

// unknownDetail explains a for_each or count known only after apply.
func unknownDetail(expr hcl.Expression, arg, what string) string {
	cause := "values that cannot be determined until apply"
	for _, t := range expr.Variables() {
		if t.RootName() == "node" {
			cause = "node outputs that cannot be determined until apply"
			break
		}
	}
	example := "for_each = node.fix, or toset(keys(node.fix))"
	if arg == "count" {
		example = "length(node.fix)"
	}
	return fmt.Sprintf("The %s value depends on %s, so kewplan cannot predict %s, and a plan must show every instance before it runs. Derive %s only from variables, locals and the instances of other nodes (%s), never from a node's outputs such as commit or status.", arg, cause, what, arg, example)
}

// badKeyInBranch explains an invalid branch name that comes from an instance key: the key is the thing to fix.
func badKeyInBranch(n *Node, inst *Instance, expr hcl.Expression, attr, msg string) *hcl.Diagnostic {
	if inst == nil || inst.Key == cty.NilVal || !inst.Key.IsKnown() {
		return nil
	}
	uses := false
	for _, t := range expr.Variables() {
		if r := t.RootName(); r == "each" || r == "count" {
			uses = true
		}
	}
	if !uses {
		return nil
	}
	return errorDiag("Invalid instance key in branch",
		fmt.Sprintf("The %s of %s is built from the instance key %s, and the result is not a valid branch: %s Every key that becomes part of a branch must be a valid git branch fragment; rename the key, or build the branch from a sanitised value, for example replace(each.key, \" \", \"-\").", attr, describeAddress(inst.Address), keyString(inst.Key), msg),
		expr.Range())
}

// keyString renders an instance key as written in an address: "api" (quoted) or 2.
func keyString(key cty.Value) string {
	a := InstanceAddress("", key)
	return a[1 : len(a)-1]
}

// isWholeNodeTraversal reports whether expr is exactly node.<name> and returns the name.
func isWholeNodeTraversal(expr hcl.Expression) (string, bool) {
	ste, ok := expr.(*hclsyntax.ScopeTraversalExpr)
	if !ok || len(ste.Traversal) != 2 || ste.Traversal.RootName() != "node" {
		return "", false
	}
	a, ok := ste.Traversal[1].(hcl.TraverseAttr)
	return a.Name, ok
}

// instanceObjectType is the type of node.<name> (or of one instance): every output and plan-time attribute is a
// string.
var instanceObjectType = func() cty.Type {
	attrs := map[string]cty.Type{}
	for _, n := range nodeAttributeNames {
		attrs[n] = cty.String
	}
	return cty.Object(attrs)
}()

// InstanceObject is the value a reference to one node instance takes: its outputs (unknown until it ran) and its
// plan-time attributes (unknown until the planner evaluated it). Missing entries are unknown.
func InstanceObject(outputs, planned map[string]cty.Value) cty.Value {
	attrs := make(map[string]cty.Value, len(nodeAttributeNames))
	for _, name := range NodeOutputNames {
		attrs[name] = stringOrUnknown(outputs[name])
	}
	for _, name := range NodePlanAttributeNames {
		attrs[name] = stringOrUnknown(planned[name])
	}
	return cty.ObjectVal(attrs)
}

func stringOrUnknown(v cty.Value) cty.Value {
	if v == cty.NilVal || v.IsNull() {
		return cty.UnknownVal(cty.String)
	}
	sv, err := convert.Convert(v, cty.String)
	if err != nil {
		return cty.UnknownVal(cty.String)
	}
	return sv
}

// NodeValue is the value node.<name> takes: the instance object of a node without for_each or count, a map of
// instance objects by key (for_each), or a list of them by index (count). objects is parallel to insts.
func NodeValue(n *Node, insts []*Instance, objects []cty.Value) cty.Value {
	switch {
	case n.ForEach != nil:
		if len(objects) == 0 {
			return cty.MapValEmpty(instanceObjectType)
		}
		m := make(map[string]cty.Value, len(objects))
		for i, inst := range insts {
			m[inst.Key.AsString()] = objects[i]
		}
		return cty.MapVal(m)
	case n.Count != nil:
		if len(objects) == 0 {
			return cty.ListValEmpty(instanceObjectType)
		}
		return cty.ListVal(objects)
	case len(objects) == 1:
		return objects[0]
	}
	return cty.UnknownVal(instanceObjectType)
}

// SetNodeValues replaces the node object of an evaluation context made by EvalContext, and evaluates again the
// local values that refer to nodes, directly or through other locals. Its diagnostics are those of that
// evaluation. The planner calls it as it learns each node's instances.
func (c *Config) SetNodeValues(ctx *hcl.EvalContext, nodes map[string]cty.Value) hcl.Diagnostics {
	ctx.Variables["node"] = cty.ObjectVal(nodes)
	order, _ := c.localOrder()
	onNodes := map[string]bool{}
	var diags hcl.Diagnostics
	var locals map[string]cty.Value
	for _, name := range order {
		expr := c.Locals[name].Expr
		for _, t := range expr.Variables() {
			switch t.RootName() {
			case "node":
				onNodes[name] = true
			case "local":
				if len(t) > 1 {
					if a, ok := t[1].(hcl.TraverseAttr); ok && onNodes[a.Name] {
						onNodes[name] = true
					}
				}
			}
		}
		if !onNodes[name] {
			continue
		}
		if locals == nil {
			locals = ctx.Variables["local"].AsValueMap()
		}
		val, d := expr.Value(ctx)
		diags = append(diags, d...)
		if d.HasErrors() {
			val = cty.DynamicVal
		}
		locals[name] = val
		ctx.Variables["local"] = cty.ObjectVal(locals)
	}
	return diags
}
