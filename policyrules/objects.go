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
func PlanObject(doc *jsonplan.Document) cty.Value {
	instances := map[string]int{}
	for i := range doc.Nodes {
		instances[blockOf(&doc.Nodes[i])]++
	}
	nodes := make([]cty.Value, len(doc.Nodes))
	// Each node's object is its own: they are built side by side.
	parallel.For(len(doc.Nodes), func(i int) { nodes[i] = nodeObject(&doc.Nodes[i], instances) })
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
	engine := doc.EngineName()
	return cty.ObjectVal(map[string]cty.Value{
		"nodes":    cty.TupleVal(nodes),
		"engine":   cty.StringVal(engine),
		"exposure": mapOrEmpty(exposure),
		"budget":   budget,
		"totals": cty.ObjectVal(map[string]cty.Value{
			"nodes":          cty.NumberIntVal(int64(len(doc.Nodes))),
			"blocks":         cty.NumberIntVal(int64(len(instances))),
			"credentials":    cty.NumberIntVal(int64(len(credentials))),
			"max_usd":        maxUSD,
			"worst_case_usd": worst,
		}),
	})
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
	key := cty.NullVal(cty.DynamicPseudoType)
	if n.Instance != nil {
		switch k := n.Instance.Key.(type) {
		case string:
			key = cty.StringVal(k)
		case int64:
			key = cty.NumberIntVal(k)
		case float64:
			key = cty.NumberFloatVal(k)
		}
	}
	modes := map[string]cty.Value{}
	for c, m := range n.CredentialModes {
		modes[c] = cty.StringVal(m)
	}
	egress := make([]cty.Value, 0, len(n.Egress))
	hosts := make([]string, 0, len(n.Egress))
	for _, e := range n.Egress {
		egress = append(egress, cty.ObjectVal(map[string]cty.Value{
			"host":    cty.StringVal(e.Host),
			"port":    cty.NumberIntVal(int64(e.Port)),
			"origins": stringList(e.Origins),
		}))
		hosts = append(hosts, e.Host)
	}
	budget := cty.NullVal(cty.DynamicPseudoType)
	worst := cty.NullVal(cty.Number)
	if b := n.Budget; b != nil {
		worst = floatOrNull(b.MaxUSD)
		budget = cty.ObjectVal(map[string]cty.Value{
			"max_usd":     worst,
			"max_tokens":  intOrNull(b.MaxTokens),
			"max_turns":   intOrNull(b.MaxTurns),
			"warn_at":     floatOrNull(b.WarnAt),
			"timeout":     cty.StringVal(b.Timeout),
			"cost_source": cty.StringVal(b.CostSource),
		})
	}
	return cty.ObjectVal(map[string]cty.Value{
		"name":             cty.StringVal(n.Name),
		"block":            cty.StringVal(blockOf(n)),
		"key":              key,
		"instances":        cty.NumberIntVal(int64(max(instances[blockOf(n)], 1))),
		"runner":           cty.StringVal(n.Runner),
		"protocol":         cty.StringVal(n.Protocol),
		"role":             cty.StringVal(n.Role),
		"model":            cty.StringVal(n.Model),
		"image":            cty.StringVal(n.Image),
		"network":          cty.StringVal(n.Network),
		"runtime":          cty.StringVal(n.Runtime),
		"isolation":        cty.StringVal(n.Isolation),
		"repository":       cty.StringVal(n.Repository),
		"ref":              cty.StringVal(n.Ref),
		"push":             pushObject(n.Push),
		"credentials":      stringList(n.Credentials),
		"credential_mode":  cty.StringVal(n.CredentialMode),
		"credential_modes": mapOrEmpty(modes),
		"egress":           listOrEmpty(egress),
		"egress_hosts":     stringList(sortedUnique(hosts)),
		"private_hosts":    stringList(n.PrivateHosts),
		"provider_fetch":   stringList(n.ProviderFetch),
		"depends_on":       stringList(n.DependsOn),
		"unknown":          stringList(n.Unknown),
		"pids_limit":       cty.NumberIntVal(n.PidsLimit),
		"memory":           cty.StringVal(n.Memory),
		"cpus":             cty.StringVal(n.CPUs),
		"budget":           budget,
		"worst_case_usd":   worst,
		"errors":           cty.BoolVal(n.Errors),
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
