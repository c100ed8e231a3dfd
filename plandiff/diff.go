package plandiff

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/internal/jsonlimit"
	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/planner"
)

// Finding kinds of the exposure delta. The widening kinds are also the SARIF rule ids of `kewplan diff`.
const (
	KindCredentialAdded   = "widening-credential"
	KindNetworkOpened     = "widening-network"
	KindHardeningLost     = "widening-hardening"
	KindImageUnpinned     = "widening-image-unpinned"
	KindCredentialRemoved = "narrowing-credential"
	KindNetworkClosed     = "narrowing-network"
	KindHardeningGained   = "narrowing-hardening"
	KindImagePinned       = "narrowing-image-pinned"
	KindRuntimeWidened    = "widening-runtime"
	KindRuntimeNarrowed   = "narrowing-runtime"
	KindEgressAdded       = "widening-egress"
	KindEgressRemoved     = "narrowing-egress"
	// KindCredentialModeWidened: a credential a node could only use through kewplan's proxy (brokered) is now
	// held by its container (forward); KindCredentialModeNarrowed the other way.
	KindCredentialModeWidened  = "widening-credential-mode"
	KindCredentialModeNarrowed = "narrowing-credential-mode"
)

// Finding is one entry of the credential exposure delta.
type Finding struct {
	Kind       string
	Widening   bool
	Node       string
	Credential string // the credential, for the credential kinds
	Message    string // one sentence, for people
	// Range is where the change is in HEAD: the node's block (for a removed node, in BASE). Nil when the plan
	// carries no range for the node.
	Range *hcl.Range
}

// FieldChange is a changed scalar of a node, rendered as text on both sides.
type FieldChange struct {
	Field string
	Base  string
	Head  string
}

// NodeChange is everything that changed in a node present on both sides.
type NodeChange struct {
	Name   string
	Fields []FieldChange
	// DependsOnAdded and DependsOnRemoved are the dependency changes, sorted.
	DependsOnAdded   []string
	DependsOnRemoved []string
	// Argv is the word-level diff of the argv; nil when the argv did not change (a reorder of -e flags is no
	// change).
	Argv  []WordEdit
	Range *hcl.Range // the node's block in HEAD
}

// NodeSummary describes an added or removed node.
type NodeSummary struct {
	Name        string
	Runner      string
	Role        string
	Image       string
	Network     string
	Isolation   string // the node's runtime for people: "gVisor (runsc)"
	Credentials []string
	Argv        []string
	Range       *hcl.Range
}

// Diagnostic is a plan diagnostic as the diff compares it: by severity, rule and summary, not by position, so
// that moving a block does not count as a new warning.
type Diagnostic struct {
	Severity string
	Rule     string
	Summary  string
	Detail   string
	Range    *hcl.Range
}

// Side identifies one of the two plans.
type Side struct {
	Name           string // the file name as given on the command line
	FormatVersion  string
	KewplanVersion string
	ConfigDigest   string
}

// Diff is the comparison of two plans.
type Diff struct {
	Base, Head Side
	// Exposure is the credential exposure delta: widening findings first, then by node, kind and credential.
	Exposure []Finding
	Added    []NodeSummary // sorted by name
	Removed  []NodeSummary // sorted by name
	Changed  []NodeChange  // sorted by name
	// DiagnosticsAdded are diagnostics HEAD has and BASE has not; DiagnosticsResolved the reverse.
	DiagnosticsAdded    []Diagnostic
	DiagnosticsResolved []Diagnostic
	// PolicyJudged is set when the organisation's policy rules judged HEAD and this change (diff --policy), and
	// PolicyFindings are what they found, as HEAD's diagnostics (package policyrules fills both).
	PolicyJudged   bool
	PolicyFindings []jsonplan.Diagnostic
}

// Widened reports whether any change widens what an agent can reach: `kewplan diff` exits 2.
func (d *Diff) Widened() bool {
	for _, f := range d.Exposure {
		if f.Widening {
			return true
		}
	}
	return false
}

// Counts returns the number of widening and narrowing findings.
func (d *Diff) Counts() (widening, narrowing int) {
	for _, f := range d.Exposure {
		if f.Widening {
			widening++
		} else {
			narrowing++
		}
	}
	return widening, narrowing
}

// Empty reports whether the two plans are the same for review purposes.
func (d *Diff) Empty() bool {
	return len(d.Exposure) == 0 && len(d.Added) == 0 && len(d.Removed) == 0 && len(d.Changed) == 0 &&
		len(d.DiagnosticsAdded) == 0 && len(d.DiagnosticsResolved) == 0 && len(d.PolicyFindings) == 0
}

// MaxPlanBytes bounds a plan file read for a diff: a 10,000-node plan is a few megabytes.
const MaxPlanBytes = 256 << 20

// ErrTooLarge is returned for a plan file larger than kewplan reads.
var ErrTooLarge = fmt.Errorf("plan file larger than %d MiB", MaxPlanBytes>>20)

// DecodePlan reads a saved plan or a `kewplan plan --json` document. name is used in errors. It refuses a
// document whose format_version has another major version than this kewplan writes.
func DecodePlan(data []byte, name string) (*jsonplan.Document, error) {
	if len(data) > MaxPlanBytes {
		return nil, fmt.Errorf("%s: %w", name, ErrTooLarge)
	}
	// Bound nesting before decoding: a plan comes from a pull request, and deep nesting costs the decoder stack.
	if err := jsonlimit.Check(data, jsonlimit.Limits{MaxBytes: MaxPlanBytes}); err != nil {
		return nil, fmt.Errorf("%s: not a kewplan plan: %w", name, err)
	}
	doc, err := jsonplan.Decode(data)
	var de *jsonplan.DecodeError
	switch {
	case errors.As(err, &de):
		return nil, fmt.Errorf("%s: not a kewplan plan: %s", name, describeJSONError(data, de.Err))
	case err != nil:
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	seen := map[string]bool{}
	for i, n := range doc.Nodes {
		if n.Name == "" {
			return nil, fmt.Errorf("%s: node %d has no name", name, i)
		}
		if seen[n.Name] {
			return nil, fmt.Errorf("%s: node %q appears twice", name, n.Name)
		}
		seen[n.Name] = true
	}
	return doc, nil
}

// describeJSONError places a decoding error at a line and column of data.
func describeJSONError(data []byte, err error) string {
	var off int64 = -1
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		off = syn.Offset - 1 // the offset counts the offending byte
		if off < 0 {
			off = 0
		}
	case errors.As(err, &typ):
		off = typ.Offset
	}
	if off < 0 || off > int64(len(data)) {
		return err.Error()
	}
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	col := int(off) - bytes.LastIndexByte(data[:off], '\n')
	return fmt.Sprintf("invalid JSON at line %d, column %d: %v", line, col, err)
}

// Compare compares BASE with HEAD.
func Compare(baseName string, base *jsonplan.Document, headName string, head *jsonplan.Document) *Diff {
	d := &Diff{
		Base: Side{Name: baseName, FormatVersion: base.FormatVersion, KewplanVersion: base.KewplanVersion, ConfigDigest: base.ConfigDigest},
		Head: Side{Name: headName, FormatVersion: head.FormatVersion, KewplanVersion: head.KewplanVersion, ConfigDigest: head.ConfigDigest},
	}
	baseNodes := indexNodes(base)
	headNodes := indexNodes(head)
	for _, name := range slices.Sorted(maps.Keys(headNodes)) {
		h := headNodes[name]
		b, ok := baseNodes[name]
		if !ok {
			d.Added = append(d.Added, summarise(h))
			d.Exposure = append(d.Exposure, addedNodeFindings(h)...)
			continue
		}
		if c, findings := compareNode(b, h); c != nil || len(findings) > 0 {
			if c != nil {
				d.Changed = append(d.Changed, *c)
			}
			d.Exposure = append(d.Exposure, findings...)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(baseNodes)) {
		if _, ok := headNodes[name]; ok {
			continue
		}
		b := baseNodes[name]
		d.Removed = append(d.Removed, summarise(b))
		for _, c := range sortedSet(b.Credentials) {
			d.Exposure = append(d.Exposure, Finding{
				Kind: KindCredentialRemoved, Node: b.Name, Credential: c, Range: nodeRange(b),
				Message: fmt.Sprintf("%s no longer reaches node %s: the node was removed.", c, nodeLabel(b.Name)),
			})
		}
	}
	d.Exposure = append(d.Exposure, compareApplyBudget(base, head)...)
	sort.SliceStable(d.Exposure, func(i, j int) bool {
		a, b := d.Exposure[i], d.Exposure[j]
		if a.Widening != b.Widening {
			return a.Widening
		}
		if a.Node != b.Node {
			return a.Node < b.Node
		}
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Credential != b.Credential {
			return a.Credential < b.Credential
		}
		return a.Message < b.Message
	})
	d.DiagnosticsAdded, d.DiagnosticsResolved = compareDiagnostics(readDiagnostics(base), readDiagnostics(head))
	return d
}

func indexNodes(doc *jsonplan.Document) map[string]*jsonplan.NodeDocument {
	m := make(map[string]*jsonplan.NodeDocument, len(doc.Nodes))
	for i := range doc.Nodes {
		m[doc.Nodes[i].Name] = &doc.Nodes[i]
	}
	return m
}

func summarise(n *jsonplan.NodeDocument) NodeSummary {
	return NodeSummary{
		Name: n.Name, Runner: n.Runner, Role: n.Role, Image: n.Image, Network: n.Network,
		Isolation:   planner.IsolationTier(nodeRuntime(n)),
		Credentials: append([]string{}, n.Credentials...), Argv: redactArgv(n.Argv), Range: nodeRange(n),
	}
}

func nodeRange(n *jsonplan.NodeDocument) *hcl.Range {
	if n.Range == nil || n.Range.Filename == "" {
		return nil
	}
	return &hcl.Range{
		Filename: n.Range.Filename,
		Start:    hcl.Pos{Line: n.Range.Start.Line, Column: n.Range.Start.Column, Byte: n.Range.Start.Byte},
		End:      hcl.Pos{Line: n.Range.End.Line, Column: n.Range.End.Column, Byte: n.Range.End.Byte},
	}
}

// addedNodeFindings judges a node that BASE does not have: every credential it receives reaches a node it did not
// reach before, open egress is new egress, and its hardening is held to what kewplan always writes.
func addedNodeFindings(n *jsonplan.NodeDocument) []Finding {
	var out []Finding
	r := nodeRange(n)
	for _, c := range sortedSet(n.Credentials) {
		out = append(out, Finding{
			Kind: KindCredentialAdded, Widening: true, Node: n.Name, Credential: c, Range: r,
			Message: fmt.Sprintf("%s reaches the new node %s (runner %s%s).", c, nodeLabel(n.Name), n.Runner, originNote(n, c)),
		})
	}
	if n.Network == config.NetworkOpen {
		out = append(out, Finding{
			Kind: KindNetworkOpened, Widening: true, Node: n.Name, Range: r,
			Message: fmt.Sprintf("The new node %s has open network egress.", nodeLabel(n.Name)),
		})
	}
	for _, p := range n.PrivateHosts {
		out = append(out, Finding{
			Kind: KindEgressAdded, Widening: true, Node: n.Name, Range: r,
			Message: fmt.Sprintf("The new node %q may reach %s on a private address (private_hosts).", n.Name, p),
		})
	}
	if n.Network != config.NetworkOpen && len(n.Credentials) > 0 {
		for _, host := range n.EgressHosts() {
			out = append(out, Finding{
				Kind: KindEgressAdded, Widening: true, Node: n.Name, Range: r,
				Message: fmt.Sprintf("The new node %q can reach %s (%s) while holding %s.", n.Name, host.String(),
					strings.Join(host.Origins, ", "), strings.Join(sortedSet(n.Credentials), ", ")),
			})
		}
	}
	out = append(out, addedProviderFetchFindings(n)...)
	out = append(out, addedPushFindings(n, r)...)
	if n.Image != "" && !pinned(n.Image) {
		out = append(out, Finding{
			Kind: KindImageUnpinned, Widening: true, Node: n.Name, Range: r,
			Message: fmt.Sprintf("The new node %s runs an image not pinned by digest: %s.", nodeLabel(n.Name), n.Image),
		})
	}
	if len(n.Argv) > 0 {
		for _, text := range missingHardening(readHardening(n.Argv)) {
			out = append(out, Finding{Kind: KindHardeningLost, Widening: true, Node: n.Name, Range: r,
				Message: fmt.Sprintf("The new node %s: %s.", nodeLabel(n.Name), text)})
		}
	}
	return out
}

// compareNode returns the node's changes (nil when nothing changed) and its exposure findings.
func compareNode(b, h *jsonplan.NodeDocument) (*NodeChange, []Finding) {
	c := &NodeChange{Name: h.Name, Range: nodeRange(h)}
	r := c.Range
	field := func(name, bv, hv string) {
		if bv != hv {
			c.Fields = append(c.Fields, FieldChange{Field: name, Base: bv, Head: hv})
		}
	}
	field("runner", b.Runner, h.Runner)
	field("protocol", b.Protocol, h.Protocol)
	field("role", b.Role, h.Role)
	field("image", b.Image, h.Image)
	field("network", b.Network, h.Network)
	field("isolation", planner.IsolationTier(nodeRuntime(b)), planner.IsolationTier(nodeRuntime(h)))
	field("model", b.Model, h.Model)
	field("repository", b.Repository, h.Repository)
	field("ref", b.Ref, h.Ref)
	field("pushes to", pushText(b), pushText(h))
	field("prompt", promptText(b), promptText(h))
	field("unknown", strings.Join(sortedSet(b.Unknown), ", "), strings.Join(sortedSet(h.Unknown), ", "))
	field("credentials", strings.Join(sortedSet(b.Credentials), ", "), strings.Join(sortedSet(h.Credentials), ", "))
	for _, cred := range intersect(b.Credentials, h.Credentials) {
		field("origin of "+cred, originKind(b, cred), originKind(h, cred))
	}
	field("egress", planner.DescribeEgress(b.Network, b.EgressHosts()), planner.DescribeEgress(h.Network, h.EgressHosts()))
	field("private hosts", strings.Join(b.PrivateHosts, ", "), strings.Join(h.PrivateHosts, ", "))
	field("provider fetch", providerFetchText(b), providerFetchText(h))
	field("errors", strconv.FormatBool(b.Errors), strconv.FormatBool(h.Errors))
	budgetFields, budgetFindings := compareBudget(b, h)
	c.Fields = append(c.Fields, budgetFields...)
	c.DependsOnAdded = difference(h.DependsOn, b.DependsOn)
	c.DependsOnRemoved = difference(b.DependsOn, h.DependsOn)
	sameArgv := equalWords(b.Argv, h.Argv) // the common case: nothing to diff, no hardening to compare
	if !sameArgv {
		bArgv, hArgv := redactArgv(b.Argv), redactArgv(h.Argv)
		if !equalWords(canonicalArgv(bArgv), canonicalArgv(hArgv)) {
			c.Argv = wordDiff(bArgv, hArgv)
		}
	}

	findings := budgetFindings
	for _, cred := range difference(h.Credentials, b.Credentials) {
		findings = append(findings, Finding{
			Kind: KindCredentialAdded, Widening: true, Node: h.Name, Credential: cred, Range: r,
			Message: fmt.Sprintf("%s now reaches node %s (runner %s%s).", cred, nodeLabel(h.Name), h.Runner, originNote(h, cred)),
		})
	}
	for _, cred := range difference(b.Credentials, h.Credentials) {
		findings = append(findings, Finding{
			Kind: KindCredentialRemoved, Node: h.Name, Credential: cred, Range: r,
			Message: fmt.Sprintf("%s no longer reaches node %s.", cred, nodeLabel(h.Name)),
		})
	}
	switch {
	case b.Network != config.NetworkOpen && h.Network == config.NetworkOpen:
		findings = append(findings, Finding{
			Kind: KindNetworkOpened, Widening: true, Node: h.Name, Range: r,
			Message: fmt.Sprintf("Node %s moved from %s to open network egress%s.", nodeLabel(h.Name), orNone(b.Network), credentialNote(h)),
		})
	case b.Network == config.NetworkOpen && h.Network != config.NetworkOpen:
		findings = append(findings, Finding{
			Kind: KindNetworkClosed, Node: h.Name, Range: r,
			Message: fmt.Sprintf("Node %s moved from open network egress to %s.", nodeLabel(h.Name), orNone(h.Network)),
		})
	}
	findings = append(findings, compareEgress(b, h)...)
	findings = append(findings, compareProviderFetch(b, h)...)
	findings = append(findings, compareCredentialModes(b, h, r)...)
	findings = append(findings, comparePush(b, h, r)...)
	switch {
	case pinned(b.Image) && !pinned(h.Image):
		findings = append(findings, Finding{
			Kind: KindImageUnpinned, Widening: true, Node: h.Name, Range: r,
			Message: fmt.Sprintf("Node %s moved off its pinned image digest: %s is now %s.", nodeLabel(h.Name), b.Image, orNone(h.Image)),
		})
	case !pinned(b.Image) && pinned(h.Image):
		findings = append(findings, Finding{
			Kind: KindImagePinned, Node: h.Name, Range: r,
			Message: fmt.Sprintf("Node %s now pins its image by digest.", nodeLabel(h.Name)),
		})
	}
	if f := compareRuntime(b, h); f != nil {
		findings = append(findings, *f)
	}
	// Hardening is read from both argv. A side without argv (a node with errors, or one whose argv is known only
	// after apply) cannot be compared, and the field changes above still show what changed.
	if sameArgv {
		// Identical argv: no hardening changed.
	} else if len(b.Argv) > 0 && len(h.Argv) > 0 {
		for _, hc := range compareHardening(readHardening(b.Argv), readHardening(h.Argv)) {
			kind := KindHardeningGained
			if hc.widening {
				kind = KindHardeningLost
			}
			findings = append(findings, Finding{Kind: kind, Widening: hc.widening, Node: h.Name, Range: r,
				Message: fmt.Sprintf("Node %s: %s.", nodeLabel(h.Name), hc.text)})
		}
	} else if len(b.Argv) == 0 && len(h.Argv) > 0 {
		for _, text := range missingHardening(readHardening(h.Argv)) {
			findings = append(findings, Finding{Kind: KindHardeningLost, Widening: true, Node: h.Name, Range: r,
				Message: fmt.Sprintf("Node %s: %s.", nodeLabel(h.Name), text)})
		}
	}

	if len(c.Fields) == 0 && len(c.DependsOnAdded) == 0 && len(c.DependsOnRemoved) == 0 && c.Argv == nil {
		return nil, findings
	}
	return c, findings
}

// compareEgress judges the hosts a node can reach on both sides. A host HEAD reaches that no host of BASE covers is
// new reach: widening when the node holds a credential in HEAD (it can send the credential there), otherwise shown
// only as a field change. A host BASE reached that HEAD no longer covers is narrowing. A side on the open network
// reaches any host, which the network findings report, so there is nothing to compare host by host.
func compareEgress(b, h *jsonplan.NodeDocument) []Finding {
	if b.Network == config.NetworkOpen || h.Network == config.NetworkOpen {
		return nil
	}
	r := nodeRange(h)
	bHosts, hHosts := b.EgressHosts(), h.EgressHosts()
	covered := func(host planner.EgressHost, by []planner.EgressHost) bool {
		for _, o := range by {
			if o.Pattern().Covers(host.Pattern()) {
				return true
			}
		}
		return false
	}
	var out []Finding
	// A private host is reach into the operator's own network, widening whatever the node holds.
	for _, p := range difference(h.PrivateHosts, b.PrivateHosts) {
		out = append(out, Finding{
			Kind: KindEgressAdded, Widening: true, Node: h.Name, Range: r,
			Message: fmt.Sprintf("Node %q may now reach %s on a private address (private_hosts).", h.Name, p),
		})
	}
	for _, p := range difference(b.PrivateHosts, h.PrivateHosts) {
		out = append(out, Finding{
			Kind: KindEgressRemoved, Node: h.Name, Range: r,
			Message: fmt.Sprintf("Node %q may no longer reach %s on a private address.", h.Name, p),
		})
	}
	if len(h.Credentials) > 0 {
		for _, host := range hHosts {
			if covered(host, bHosts) {
				continue
			}
			out = append(out, Finding{
				Kind: KindEgressAdded, Widening: true, Node: h.Name, Range: r,
				Message: fmt.Sprintf("Node %q can now reach %s (%s) while holding %s.", h.Name, host.String(),
					strings.Join(host.Origins, ", "), strings.Join(sortedSet(h.Credentials), ", ")),
			})
		}
	}
	for _, host := range bHosts {
		if covered(host, hHosts) {
			continue
		}
		out = append(out, Finding{
			Kind: KindEgressRemoved, Node: h.Name, Range: r,
			Message: fmt.Sprintf("Node %q can no longer reach %s.", h.Name, host.String()),
		})
	}
	return out
}

func promptText(n *jsonplan.NodeDocument) string {
	if n.Prompt.SHA256 == "" {
		return "(known after apply)"
	}
	return fmt.Sprintf("sha256:%s (%d bytes)", n.Prompt.SHA256, n.Prompt.Bytes)
}

// originKind is where a credential comes from: built into the runner, or a runner block. Which file and line
// hold the block is not compared, so moving a block (or planning from another directory) is not a change.
func originKind(n *jsonplan.NodeDocument, cred string) string {
	for i, c := range n.Credentials {
		if c == cred && i < len(n.CredentialOrigins) {
			if o := n.CredentialOrigins[i]; o == "builtin" || o == "" {
				return o
			}
			return "runner block"
		}
	}
	return ""
}

func originNote(n *jsonplan.NodeDocument, cred string) string {
	for i, c := range n.Credentials {
		if c == cred && i < len(n.CredentialOrigins) && n.CredentialOrigins[i] != "builtin" && n.CredentialOrigins[i] != "" {
			return ", declared at " + n.CredentialOrigins[i]
		}
	}
	return ""
}

func credentialNote(n *jsonplan.NodeDocument) string {
	if len(n.Credentials) == 0 {
		return ""
	}
	return " while holding " + strings.Join(sortedSet(n.Credentials), ", ")
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

var digestRef = regexp.MustCompile(`@sha256:[0-9a-f]{64}$`)

// pinned reports whether an image reference names its content by digest.
func pinned(image string) bool { return digestRef.MatchString(image) }

func sortedSet(s []string) []string {
	seen := map[string]bool{}
	out := []string{}
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return out
}

// difference is the sorted set of a's elements not in b.
func difference(a, b []string) []string {
	in := map[string]bool{}
	for _, v := range b {
		in[v] = true
	}
	var out []string
	for _, v := range sortedSet(a) {
		if !in[v] {
			out = append(out, v)
		}
	}
	return out
}

func intersect(a, b []string) []string {
	in := map[string]bool{}
	for _, v := range b {
		in[v] = true
	}
	var out []string
	for _, v := range sortedSet(a) {
		if in[v] {
			out = append(out, v)
		}
	}
	return out
}

func equalWords(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func readDiagnostics(doc *jsonplan.Document) []Diagnostic {
	var out []Diagnostic
	for _, dd := range doc.Diagnostics {
		if dd.Unreadable {
			continue
		}
		d := Diagnostic{Severity: dd.Severity, Rule: dd.Rule, Summary: dd.Summary, Detail: dd.Detail}
		if dd.Range != nil && dd.Range.Filename != "" {
			d.Range = nodeRange(&jsonplan.NodeDocument{Range: dd.Range})
		}
		out = append(out, d)
	}
	return out
}

// compareDiagnostics matches diagnostics as a multiset keyed by severity, rule and summary.
func compareDiagnostics(base, head []Diagnostic) (added, resolved []Diagnostic) {
	key := func(d Diagnostic) string { return d.Severity + "\x00" + d.Rule + "\x00" + d.Summary }
	count := map[string]int{}
	for _, d := range base {
		count[key(d)]++
	}
	for _, d := range head {
		if count[key(d)] > 0 {
			count[key(d)]--
			continue
		}
		added = append(added, d)
	}
	count = map[string]int{}
	for _, d := range head {
		count[key(d)]++
	}
	for _, d := range base {
		if count[key(d)] > 0 {
			count[key(d)]--
			continue
		}
		resolved = append(resolved, d)
	}
	return added, resolved
}

// nodeLabel names a node in a message: "fix" quoted, or an instance address as the planner wrote it
// (fix["api"], shard[2]), whose key is already quoted and escaped.
func nodeLabel(name string) string {
	if strings.ContainsRune(name, '[') {
		return name
	}
	return strconv.Quote(name)
}

// compareCredentialModes finds each credential both plans give the node whose mode changed: brokered → forward
// widens (the container now holds the value), forward → brokered narrows. A plan written before modes existed
// forwarded every credential.
func compareCredentialModes(b, h *jsonplan.NodeDocument, r *hcl.Range) []Finding {
	mode := func(n *jsonplan.NodeDocument, cred string) string {
		if m := n.CredentialModes[cred]; m != "" {
			return m
		}
		return config.CredentialsForward
	}
	var out []Finding
	for _, cred := range intersect(b.Credentials, h.Credentials) {
		bm, hm := mode(b, cred), mode(h, cred)
		switch {
		case bm == config.CredentialsBrokered && hm == config.CredentialsForward:
			out = append(out, Finding{Kind: KindCredentialModeWidened, Widening: true, Node: h.Name, Credential: cred, Range: r,
				Message: fmt.Sprintf("Node %s now holds %s in its container (forward); it could only use it through kewplan's proxy (brokered).", nodeLabel(h.Name), cred)})
		case bm == config.CredentialsForward && hm == config.CredentialsBrokered:
			out = append(out, Finding{Kind: KindCredentialModeNarrowed, Node: h.Name, Credential: cred, Range: r,
				Message: fmt.Sprintf("Node %s now holds only a placeholder for %s (brokered).", nodeLabel(h.Name), cred)})
		}
	}
	return out
}
