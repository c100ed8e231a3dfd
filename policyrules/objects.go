package policyrules

import (
	"sort"
	"strconv"

	"github.com/zclconf/go-cty/cty"

	"github.com/kewplan/kewplan/internal/parallel"
	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/plandiff"
)

// The objects a condition sees are the plan document's own fields under the names `plan --json` gives them,
// plus a few facts derived from them (instances, block, egress_hosts, worst_case_usd, totals). They are
// documented in docs/policy.md; a name here is part of the rule language and is never renamed.

// PlanObject is `plan`: the document's nodes and its apply-wide figures.
func PlanObject(doc *jsonplan.Document) cty.Value { return planObject(doc, nil) }

// planObject is PlanObject with each node holding only the attributes in attrs (nil: all of them): the rules'
// conditions read a few, and building the rest for 10,000 nodes is most of what judging them costs.
func planObject(doc *jsonplan.Document, attrs map[string]bool) cty.Value {
	instances := blockInstances(doc)
	fields := planFields(doc, instances)
	fields["nodes"] = nodesTuple(doc, instances, attrs)
	return cty.ObjectVal(fields)
}

// blockInstances counts the instances of each node block.
func blockInstances(doc *jsonplan.Document) map[string]int {
	instances := map[string]int{}
	for i := range doc.Nodes {
		instances[blockOf(&doc.Nodes[i])]++
	}
	return instances
}

// nodesTuple is plan.nodes.
func nodesTuple(doc *jsonplan.Document, instances map[string]int, attrs map[string]bool) cty.Value {
	nodes := make([]cty.Value, len(doc.Nodes))
	// Each node's object is its own: they are built side by side.
	parallel.For(len(doc.Nodes), func(i int) { nodes[i] = projectedNode(&doc.Nodes[i], instances, attrs) })
	return cty.TupleVal(nodes)
}

// planFields are plan's attributes but nodes.
func planFields(doc *jsonplan.Document, instances map[string]int) map[string]cty.Value {
	exposure := map[string]cty.Value{}
	for cred, names := range doc.Exposure {
		exposure[cred] = stringList(names)
	}
	credentials := map[string]bool{}
	for i := range doc.Nodes {
		for _, c := range doc.Nodes[i].Credentials {
			credentials[c] = true
		}
	}
	budget := cty.NullVal(cty.DynamicPseudoType)
	worst, maxUSD := cty.NullVal(cty.Number), cty.NullVal(cty.Number)
	if b := doc.Budget; b != nil {
		worst, maxUSD = floatOrNull(b.WorstCaseUSD), floatOrNull(b.MaxUSD)
		budget = cty.ObjectVal(map[string]cty.Value{
			"max_usd":        maxUSD,
			"worst_case_usd": worst,
			"unbounded":      stringList(b.Unbounded),
		})
	}
	return map[string]cty.Value{
		"engine":   cty.StringVal(doc.EngineName()),
		"exposure": mapOrEmpty(exposure),
		"budget":   budget,
		"totals": cty.ObjectVal(map[string]cty.Value{
			"nodes":          cty.NumberIntVal(int64(len(doc.Nodes))),
			"blocks":         cty.NumberIntVal(int64(len(instances))),
			"credentials":    cty.NumberIntVal(int64(len(credentials))),
			"max_usd":        maxUSD,
			"worst_case_usd": worst,
		}),
	}
}

// ChangeObject is `change`: the diff of head against a base plan; null when there is no base.
func ChangeObject(d *plandiff.Diff, head *jsonplan.Document) cty.Value {
	if d == nil {
		return cty.NullVal(cty.DynamicPseudoType)
	}
	byName := map[string]*jsonplan.NodeDocument{}
	instances := map[string]int{}
	for i := range head.Nodes {
		byName[head.Nodes[i].Name] = &head.Nodes[i]
		instances[blockOf(&head.Nodes[i])]++
	}
	var widenings, narrowings []cty.Value
	for _, f := range d.Exposure {
		attrs := map[string]cty.Value{}
		n := byName[f.Node]
		if n == nil {
			n = &jsonplan.NodeDocument{Name: f.Node}
		}
		for k, v := range nodeObject(n, instances).AsValueMap() {
			attrs[k] = v
		}
		attrs["rule"] = cty.StringVal(f.Kind)
		attrs["node"] = cty.StringVal(f.Node)
		attrs["credential"] = cty.StringVal(f.Credential)
		attrs["message"] = cty.StringVal(f.Message)
		if f.Widening {
			widenings = append(widenings, cty.ObjectVal(attrs))
		} else {
			narrowings = append(narrowings, cty.ObjectVal(attrs))
		}
	}
	names := func(ns []plandiff.NodeSummary) cty.Value {
		out := make([]string, 0, len(ns))
		for _, n := range ns {
			out = append(out, n.Name)
		}
		return stringList(out)
	}
	changed := make([]string, 0, len(d.Changed))
	for _, c := range d.Changed {
		changed = append(changed, c.Name)
	}
	return cty.ObjectVal(map[string]cty.Value{
		"widened":    cty.BoolVal(d.Widened()),
		"widenings":  cty.TupleVal(widenings),
		"narrowings": cty.TupleVal(narrowings),
		"added":      names(d.Added),
		"removed":    names(d.Removed),
		"changed":    stringList(changed),
	})
}

// blockOf is the node block a node (or instance) comes from.
func blockOf(n *jsonplan.NodeDocument) string {
	if n.Instance != nil && n.Instance.Node != "" {
		return n.Instance.Node
	}
	return n.Name
}

func nodeObject(n *jsonplan.NodeDocument, instances map[string]int) cty.Value {
	return projectedNode(n, instances, nil)
}

// projectedNode is a node's object with the attributes in attrs (nil: all).
func projectedNode(n *jsonplan.NodeDocument, instances map[string]int, attrs map[string]bool) cty.Value {
	m := make(map[string]cty.Value, nodeAttributeCount)
	for _, a := range nodeAttributes {
		if attrs == nil || attrs[a.name] {
			m[a.name] = a.value(n, instances)
		}
	}
	if len(m) == 0 {
		return cty.EmptyObjectVal
	}
	return cty.ObjectVal(m)
}

// nodeAttribute is one attribute of a node's object and how it is made from the node's document.
type nodeAttribute struct {
	name  string
	value func(n *jsonplan.NodeDocument, instances map[string]int) cty.Value
}

const nodeAttributeCount = 30

// nodeAttributes are a node's object, attribute by attribute: the names of docs/policy.md.
var nodeAttributes = []nodeAttribute{
	{"name", func(n *jsonplan.NodeDocument, _ map[string]int) cty.Value { return cty.StringVal(n.Name) }},
	{"block", func(n *jsonplan.NodeDocument, _ map[string]int) cty.Value { return cty.StringVal(blockOf(n)) }},
	{"key", func(n *jsonplan.NodeDocument, _ map[string]int) cty.Value { return instanceKey(n) }},
	{"instances", func(n *jsonplan.NodeDocument, in map[string]int) cty.Value {
		return cty.NumberIntVal(int64(max(in[blockOf(n)], 1)))
	}},
	{"runner", func(n *jsonplan.NodeDocument, _ map[string]int) cty.Value { return cty.StringVal(n.Runner) }},
	{"protocol", func(n *jsonplan.NodeDocument, _ map[string]int) cty.Value { return cty.StringVal(n.Protocol) }},
	{"role", func(n *jsonplan.NodeDocument, _ map[string]int) cty.Value { return cty.StringVal(n.Role) }},
	{"model", func(n *jsonplan.NodeDocument, _ map[string]int) cty.Value { return cty.StringVal(n.Model) }},
	{"image", func(n *jsonplan.NodeDocument, _ map[string]int) cty.Value { return cty.StringVal(n.Image) }},
	{"network", func(n *jsonplan.NodeDocument, _ map[string]int) cty.Value { return cty.StringVal(n.Network) }},
	{"runtime", func(n *jsonplan.NodeDocument, _ map[string]int) cty.Value { return cty.StringVal(n.Runtime) }},
	{"isolation", func(n *jsonplan.NodeDocument, _ map[string]int) cty.Value { return cty.StringVal(n.Isolation) }},
	{"repository", func(n *jsonplan.NodeDocument, _ map[string]int) cty.Value { return cty.StringVal(n.Repository) }},
	{"ref", func(n *jsonplan.NodeDocument, _ map[string]int) cty.Value { return cty.StringVal(n.Ref) }},
	{"push", func(n *jsonplan.NodeDocument, _ map[string]int) cty.Value { return pushObject(n.Push) }},
	{"credentials", func(n *jsonplan.NodeDocument, _ map[string]int) cty.Value { return stringList(n.Credentials) }},
	{"credential_mode", func(n *jsonplan.NodeDocument, _ map[string]int) cty.Value { return cty.StringVal(n.CredentialMode) }},
	{"credential_modes", func(n *jsonplan.NodeDocument, _ map[string]int) cty.Value {
		modes := map[string]cty.Value{}
		for c, m := range n.CredentialModes {
			modes[c] = cty.StringVal(m)
		}
		return mapOrEmpty(modes)
	}},
	{"egress", func(n *jsonplan.NodeDocument, _ map[string]int) cty.Value {
		egress := make([]cty.Value, 0, len(n.Egress))
		for _, e := range n.Egress {
			egress = append(egress, cty.ObjectVal(map[string]cty.Value{
				"host":    cty.StringVal(e.Host),
				"port":    cty.NumberIntVal(int64(e.Port)),
				"origins": stringList(e.Origins),
			}))
		}
		return listOrEmpty(egress)
	}},
	{"egress_hosts", func(n *jsonplan.NodeDocument, _ map[string]int) cty.Value {
		hosts := make([]string, 0, len(n.Egress))
		for _, e := range n.Egress {
			hosts = append(hosts, e.Host)
		}
		return stringList(sortedUnique(hosts))
	}},
	{"private_hosts", func(n *jsonplan.NodeDocument, _ map[string]int) cty.Value { return stringList(n.PrivateHosts) }},
	{"provider_fetch", func(n *jsonplan.NodeDocument, _ map[string]int) cty.Value { return stringList(n.ProviderFetch) }},
	{"depends_on", func(n *jsonplan.NodeDocument, _ map[string]int) cty.Value { return stringList(n.DependsOn) }},
	{"unknown", func(n *jsonplan.NodeDocument, _ map[string]int) cty.Value { return stringList(n.Unknown) }},
	{"pids_limit", func(n *jsonplan.NodeDocument, _ map[string]int) cty.Value { return cty.NumberIntVal(n.PidsLimit) }},
	{"memory", func(n *jsonplan.NodeDocument, _ map[string]int) cty.Value { return cty.StringVal(n.Memory) }},
	{"cpus", func(n *jsonplan.NodeDocument, _ map[string]int) cty.Value { return cty.StringVal(n.CPUs) }},
	{"budget", func(n *jsonplan.NodeDocument, _ map[string]int) cty.Value { return budgetObject(n.Budget) }},
	{"worst_case_usd", func(n *jsonplan.NodeDocument, _ map[string]int) cty.Value {
		if n.Budget == nil {
			return cty.NullVal(cty.Number)
		}
		return floatOrNull(n.Budget.MaxUSD)
	}},
	{"errors", func(n *jsonplan.NodeDocument, _ map[string]int) cty.Value { return cty.BoolVal(n.Errors) }},
}

// NodeAttributeNames are the attributes of a node's object, in documentation order.
func NodeAttributeNames() []string {
	out := make([]string, len(nodeAttributes))
	for i, a := range nodeAttributes {
		out[i] = a.name
	}
	return out
}

func instanceKey(n *jsonplan.NodeDocument) cty.Value {
	if n.Instance != nil {
		switch k := n.Instance.Key.(type) {
		case string:
			return cty.StringVal(k)
		case int64:
			return cty.NumberIntVal(k)
		case float64:
			return cty.NumberFloatVal(k)
		}
	}
	return cty.NullVal(cty.DynamicPseudoType)
}

func budgetObject(b *jsonplan.BudgetDocument) cty.Value {
	if b == nil {
		return cty.NullVal(cty.DynamicPseudoType)
	}
	return cty.ObjectVal(map[string]cty.Value{
		"max_usd":     floatOrNull(b.MaxUSD),
		"max_tokens":  intOrNull(b.MaxTokens),
		"max_turns":   intOrNull(b.MaxTurns),
		"warn_at":     floatOrNull(b.WarnAt),
		"timeout":     cty.StringVal(b.Timeout),
		"cost_source": cty.StringVal(b.CostSource),
	})
}

func pushObject(p *jsonplan.PushDocument) cty.Value {
	if p == nil {
		return cty.NullVal(cty.DynamicPseudoType)
	}
	pr := cty.NullVal(cty.DynamicPseudoType)
	if p.PullRequest != nil {
		pr = cty.ObjectVal(map[string]cty.Value{"base": cty.StringVal(p.PullRequest.Base), "title": cty.StringVal(p.PullRequest.Title)})
	}
	return cty.ObjectVal(map[string]cty.Value{
		"branch":               cty.StringVal(p.Branch),
		"pull_request":         pr,
		"protected":            cty.BoolVal(p.Protected),
		"allow_protected_push": cty.BoolVal(p.AllowProtectedPush),
		"protected_branches":   stringList(p.ProtectedBranches),
	})
}

func stringList(s []string) cty.Value {
	if len(s) == 0 {
		return cty.ListValEmpty(cty.String)
	}
	vals := make([]cty.Value, len(s))
	for i, x := range s {
		vals[i] = cty.StringVal(x)
	}
	return cty.ListVal(vals)
}

func listOrEmpty(vals []cty.Value) cty.Value {
	if len(vals) == 0 {
		return cty.EmptyTupleVal
	}
	return cty.TupleVal(vals)
}

func mapOrEmpty(m map[string]cty.Value) cty.Value {
	if len(m) == 0 {
		return cty.EmptyObjectVal
	}
	return cty.ObjectVal(m)
}

func floatOrNull(f *float64) cty.Value {
	if f == nil {
		return cty.NullVal(cty.Number)
	}
	return cty.NumberFloatVal(*f)
}

func intOrNull(i *int64) cty.Value {
	if i == nil {
		return cty.NullVal(cty.Number)
	}
	return cty.NumberIntVal(*i)
}

func sortedUnique(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// nodeLabel is a node for a sentence.
func nodeLabel(name string) string { return strconv.Quote(name) }
