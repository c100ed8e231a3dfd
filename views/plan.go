package views

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/internal/termsafe"
	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/planner"
)

// planRenderer writes a plan document in one format.
type planRenderer func(w io.Writer, doc *jsonplan.Document) error

// planFormats are the formats of `kewplan plan --format` and `kewplan show`; adding a format is one entry.
var planFormats = map[string]planRenderer{
	"human":    WritePlanHuman,
	"json":     WritePlanJSON,
	"markdown": WritePlanMarkdown,
}

// planFormatNames lists planFormats, sorted, for help texts and errors.
func planFormatNames() []string {
	return slices.Sorted(maps.Keys(planFormats))
}

// WritePlanJSON writes the document as indented JSON. Map keys are sorted by encoding/json, so the bytes are
// deterministic. The saved object is left out: `plan --json` prints only the plan. The nodes are encoded in
// parallel and streamed in order, so a plan of many nodes is never held twice, as a document and as text.
func WritePlanJSON(w io.Writer, doc *jsonplan.Document) error {
	c := *doc
	c.Saved = nil
	return c.WriteIndented(w)
}

// planDiagnostics are the diagnostics of a document to render: an entry a plan file held that could not be read,
// or one without a summary, is shown as an error saying so, so nothing is silently dropped.
func planDiagnostics(ds jsonplan.Diagnostics) []jsonplan.Diagnostic {
	out := make([]jsonplan.Diagnostic, 0, len(ds))
	for _, d := range ds {
		if d.Unreadable || d.Summary == "" {
			d = jsonplan.Diagnostic{Severity: jsonplan.SeverityError, Summary: "Unreadable diagnostic",
				Detail: "The plan holds a diagnostic this version of kewplan cannot read."}
		}
		out = append(out, d)
	}
	return out
}

func planDiagLocation(d jsonplan.Diagnostic) string {
	if d.Range == nil {
		return ""
	}
	return fmt.Sprintf("%s:%d", d.Range.Filename, d.Range.Start.Line)
}

// planCounts summarises a document for the closing line.
type planCounts struct {
	nodes, runnable, errors, warnings, credentials int
}

func countPlan(doc *jsonplan.Document, diags []jsonplan.Diagnostic) planCounts {
	c := planCounts{nodes: len(doc.Nodes), credentials: len(doc.Exposure)}
	for _, n := range doc.Nodes {
		if len(n.Argv) > 0 {
			c.runnable++
		}
	}
	for _, d := range diags {
		if d.Severity == jsonplan.SeverityWarning {
			c.warnings++
		} else {
			c.errors++
		}
	}
	return c
}

// planSummaryLine is the plan's one-line verdict.
func planSummaryLine(c planCounts) string {
	parts := fmt.Sprintf("%s, %s exposed, %s, %s", count(c.nodes, "node", "nodes"),
		count(c.credentials, "credential", "credentials"), count(c.errors, "error", "errors"),
		count(c.warnings, "warning", "warnings"))
	if c.errors > 0 {
		return fmt.Sprintf("Plan failed: %s. Nodes with errors have no argv; fix the errors and plan again.", parts)
	}
	return fmt.Sprintf("Plan: %s.", parts)
}

// planDockerValueFlags are the docker run flags of a planned argv that take a value.
var planDockerValueFlags = map[string]bool{
	"--name": true, "--tmpfs": true, "--cap-drop": true, "--security-opt": true, "--pids-limit": true,
	"--network": true, "--runtime": true, "--dns": true, "--memory": true, "--cpus": true, "--label": true, "-v": true, "-w": true, "-e": true,
}

// argvLines splits a planned `docker run` argv into shell-quoted lines of one flag each (with its value), the
// image on its own line, then the container args the same way. Joined with " \\\n" they form a command a
// reviewer can read and paste.
func argvLines(argv []string) []string {
	if len(argv) < 2 {
		return []string{planner.ShellJoin(argv)}
	}
	lines := []string{planner.ShellJoin(argv[:2])}
	i := 2
	for ; i < len(argv); i++ {
		a := argv[i]
		if !strings.HasPrefix(a, "-") {
			break // the image
		}
		if planDockerValueFlags[a] && i+1 < len(argv) {
			lines = append(lines, planner.ShellJoin(argv[i:i+2]))
			i++
			continue
		}
		lines = append(lines, planner.ShellQuote(a))
	}
	if i < len(argv) {
		lines = append(lines, planner.ShellQuote(argv[i]))
		i++
	}
	for ; i < len(argv); i++ {
		a := argv[i]
		if strings.HasPrefix(a, "-") && !strings.Contains(a, "=") && i+1 < len(argv) && !strings.HasPrefix(argv[i+1], "-") {
			lines = append(lines, planner.ShellJoin(argv[i:i+2]))
			i++
			continue
		}
		lines = append(lines, planner.ShellQuote(a))
	}
	return lines
}

// planNodeFacts are the labelled lines of one node, shared by the human and markdown views.
func planNodeFacts(n *jsonplan.NodeDocument) [][2]string {
	unknown := map[string]bool{}
	for _, u := range n.Unknown {
		unknown[u] = true
	}
	val := func(attr, v string) string {
		if unknown[attr] {
			return planner.UnknownValue
		}
		if v == "" {
			return "(none)"
		}
		return v
	}
	runner := val("runner", n.Runner)
	if n.Protocol != "" && n.Protocol != n.Runner {
		runner += " (protocol " + n.Protocol + ")"
	}
	prompt := planner.UnknownValue
	if !unknown["prompt"] {
		prompt = "(none)"
		if n.Prompt.SHA256 != "" {
			prompt = fmt.Sprintf("sha256:%s, %s", n.Prompt.SHA256, count(n.Prompt.Bytes, "byte", "bytes"))
		}
	}
	creds := "(none)"
	if len(n.Credentials) > 0 {
		parts := make([]string, len(n.Credentials))
		for i, c := range n.Credentials {
			parts[i] = c
			if i < len(n.CredentialOrigins) {
				parts[i] += " (" + n.CredentialOrigins[i] + ")"
			}
		}
		creds = strings.Join(parts, ", ")
		if m := credentialModeText(n); m != "" {
			creds += "; " + m
		}
	}
	isolation := planner.IsolationTier(n.Runtime)
	if unknown["runtime"] {
		isolation = planner.UnknownValue
	}
	deps := "(none)"
	if len(n.DependsOn) > 0 {
		deps = strings.Join(n.DependsOn, ", ")
	}
	facts := [][2]string{
		{"runner", runner},
		{"role", val("role", n.Role)},
		{"image", val("image", n.Image)},
		{"network", val("network", n.Network)},
		{"isolation", isolation},
		{"model", val("model", n.Model)},
		{"repository", val("repo", n.Repository)},
		{"ref", planRefText(n, unknown["ref"])},
		{"pushes to", planPushText(n, unknown)},
		{"prompt", prompt},
		{"credentials", creds},
		{"egress", planEgress(n)},
		{"via provider", planProviderFetch(n)},
		{"depends on", deps},
		{"budget", budgetCaps(n.Budget)},
		{"cost", budgetCost(n.Budget)},
	}
	if len(n.Credentials) == 0 {
		facts = slices.DeleteFunc(facts, func(f [2]string) bool { return f[0] == "via provider" })
	}
	if len(n.PrivateHosts) > 0 {
		facts = slices.Insert(facts, 9, [2]string{"private", strings.Join(n.PrivateHosts, ", ") + " (may resolve to private addresses)"})
	}
	var rest []string
	for _, u := range n.Unknown {
		switch u {
		case "runner", "role", "model", "prompt", "argv", "runtime", "repo", "ref", "branch":
		default:
			rest = append(rest, u)
		}
	}
	if len(rest) > 0 {
		facts = append(facts, [2]string{"after apply", strings.Join(rest, ", ")})
	}
	if n.Retry != nil {
		facts = append(facts, [2]string{"retry", planRetryText(n.Retry)})
	}
	return facts
}

// planRefText is the ref a node is cloned at, for people.
func planRefText(n *jsonplan.NodeDocument, unknown bool) string {
	switch {
	case unknown:
		return planner.UnknownValue
	case n.Ref == "":
		return "(the remote's default branch)"
	}
	return n.Ref
}

// planPushText is where a node's commits go, for people: "kew/fix (pull request into main: "Fix the bug")",
// "main (protected; allow_protected_push)", or "none (reviewer)".
func planPushText(n *jsonplan.NodeDocument, unknown map[string]bool) string {
	if n.Push == nil {
		if n.Role == config.RoleWorker {
			return "(not recorded in this plan)"
		}
		return "none (reviewer)"
	}
	branch := n.Push.Branch
	if unknown["branch"] || branch == "" {
		branch = planner.UnknownValue
	}
	var notes []string
	if unknown["role"] {
		notes = append(notes, "if the node is a worker")
	}
	if n.Push.Protected {
		notes = append(notes, "a protected branch, allowed by allow_protected_push")
	}
	if pr := n.Push.PullRequest; pr != nil {
		notes = append(notes, pullRequestText(pr.Base, pr.Title))
	} else {
		notes = append(notes, "no pull request")
	}
	return branch + " (" + strings.Join(notes, "; ") + ")"
}

// pullRequestText describes a pull request by its base and title.
func pullRequestText(base, title string) string {
	into := "the default branch"
	if base != "" {
		into = base
	}
	if title == "" {
		return "pull request into " + into
	}
	return fmt.Sprintf("pull request into %s: %q", into, title)
}

// writesLine is one repository of the plan's closing write section: "github.com/acme/widgets: fix → kew/fix
// (pull request into main), lint → kew/lint; read by review".
func writesLine(rw jsonplan.RepositoryWrites) string {
	name := rw.Repository
	if name == "" {
		name = planner.UnknownValue
	}
	var parts []string
	for _, w := range rw.Writes {
		branch := w.Branch
		if branch == "" {
			branch = planner.UnknownValue
		}
		p := w.Node + " → " + branch
		var notes []string
		if w.Protected {
			notes = append(notes, "protected")
		}
		if w.PullRequestBase != "" {
			notes = append(notes, "pull request into "+w.PullRequestBase)
		}
		if len(notes) > 0 {
			p += " (" + strings.Join(notes, ", ") + ")"
		}
		parts = append(parts, p)
	}
	line := name + ": "
	if len(parts) == 0 {
		line += "no push"
	} else {
		line += strings.Join(parts, ", ")
	}
	if len(rw.Readers) > 0 {
		line += "; read by " + strings.Join(rw.Readers, ", ")
	}
	return line
}

// planEgress is the node's reach with the origin of each host, "any host (network open)" or "no host".
func planEgress(n *jsonplan.NodeDocument) string {
	for _, u := range n.Unknown {
		if u == "runner" {
			return planner.UnknownValue
		}
	}
	return planner.DescribeEgress(n.Network, n.EgressHosts())
}

// reachSentence is what a reviewer must weigh for one node, in one sentence: the credentials it holds next to the
// hosts it can reach, e.g. `fix holds ANTHROPIC_API_KEY and can reach api.anthropic.com (runner), github.com
// (sandbox)`.
func reachSentence(n *jsonplan.NodeDocument) string {
	holds := "holds no credential"
	switch {
	case len(n.Credentials) > 0 && n.CredentialMode == config.CredentialsBrokered:
		holds = fmt.Sprintf("holds placeholders for %s (brokered: usable only through the proxy, at %s)", strings.Join(n.Credentials, ", "), strings.Join(n.BrokeredEndpoints, ", "))
	case len(n.Credentials) > 0:
		holds = "holds " + strings.Join(n.Credentials, ", ")
	}
	reach := planEgress(n)
	if len(n.PrivateHosts) > 0 {
		reach += ", of which " + strings.Join(n.PrivateHosts, ", ") + " on private addresses"
	}
	if len(n.Credentials) > 0 {
		reach += "; provider fetch: " + planProviderFetch(n)
	}
	sentence := fmt.Sprintf("%s %s and can reach %s", n.Name, holds, reach)
	if len(n.BrokeredPaths) > 0 && n.CredentialMode == config.CredentialsBrokered {
		sentence += "; its broker forwards only " + strings.Join(n.BrokeredPaths, ", ")
	}
	return sentence
}

// planProviderFetch is what the node's model requests may make its provider fetch on the agent's behalf.
func planProviderFetch(n *jsonplan.NodeDocument) string {
	return planner.DescribeProviderFetch(n.CredentialMode, len(n.Credentials) > 0, n.ProviderFetch)
}

// credentialModeText says how a node's container gets its credentials: "brokered (…)" or "forward (…)"; "" for
// a document that does not say (written before credential modes).
func credentialModeText(n *jsonplan.NodeDocument) string {
	switch n.CredentialMode {
	case config.CredentialsBrokered:
		return fmt.Sprintf("brokered (the container holds placeholders; the proxy adds the credentials only for %s)", strings.Join(n.BrokeredEndpoints, ", "))
	case config.CredentialsForward:
		return "forward (the container holds the values)"
	}
	return ""
}

// exposureModes splits the nodes each credential reaches into those whose containers hold it and those that
// can only use it through the proxy (brokered).
func exposureModes(doc *jsonplan.Document) (held, brokered map[string][]string) {
	held, brokered = map[string][]string{}, map[string][]string{}
	for i := range doc.Nodes {
		n := &doc.Nodes[i]
		for _, c := range n.Credentials {
			if n.CredentialModes[c] == config.CredentialsBrokered {
				brokered[c] = append(brokered[c], n.Name)
			} else {
				held[c] = append(held[c], n.Name)
			}
		}
	}
	return held, brokered
}

// exposureCell is a credential's nodes in the exposure table: "fix, lint" or "fix (brokered), lint".
func exposureCell(nodes []string, brokered map[string]bool) string {
	parts := make([]string, len(nodes))
	for i, n := range nodes {
		parts[i] = n
		if brokered[n] {
			parts[i] += " (brokered)"
		}
	}
	return strings.Join(parts, ", ")
}

// planRetryText is a retry policy in one line, with where its attributes came from: "3 attempts on api_error,
// timeout; backoff 10s doubling, capped 5m (attempts from node main.hcl:20; backoff, on from sandbox main.hcl:4)".
func planRetryText(r *jsonplan.RetryDocument) string {
	var text string
	if r.Attempts <= 1 {
		text = "1 attempt (no retry)"
	} else {
		on := "nothing (no retry)"
		if len(r.On) > 0 {
			on = strings.Join(r.On, ", ")
		}
		text = fmt.Sprintf("%d attempts on %s; backoff %s doubling, capped %s", r.Attempts, on, r.Backoff,
			config.FormatDuration(config.MaxRetryBackoff))
	}
	// Group the attributes by origin, in the configuration's attribute order.
	var origins []string
	byOrigin := map[string][]string{}
	for _, attr := range []string{"attempts", "backoff", "on"} {
		o := r.Origin[attr]
		if o == "" {
			continue
		}
		if _, ok := byOrigin[o]; !ok {
			origins = append(origins, o)
		}
		byOrigin[o] = append(byOrigin[o], attr)
	}
	parts := make([]string, len(origins))
	for i, o := range origins {
		if o == planner.RetryOriginDefault {
			parts[i] = strings.Join(byOrigin[o], ", ") + " by default"
			continue
		}
		parts[i] = strings.Join(byOrigin[o], ", ") + " from " + o
	}
	return text + " (" + strings.Join(parts, "; ") + ")"
}

// planArgvNote says why a node has no argv, or "" when it has one.
func planArgvNote(n *jsonplan.NodeDocument) string {
	switch {
	case len(n.Argv) > 0:
		return ""
	case n.Errors:
		return "(none: the node has errors, see below)"
	default:
		for _, u := range n.Unknown {
			if u == "argv" || u == "model" || u == "runner" {
				return planner.UnknownValue
			}
		}
		return "(none: the node has errors, see below)"
	}
}

// WritePlanHuman writes the plan for a reviewer: each node in dependency order with its argv, the credential
// exposure, the diagnostics, and a one-line summary.
func WritePlanHuman(w io.Writer, doc *jsonplan.Document) error {
	ew := &planWriter{w: w}
	diags := planDiagnostics(doc.Diagnostics)
	counts := countPlan(doc, diags)
	if len(doc.Nodes) == 0 {
		ew.printf("No nodes to plan.\n")
	} else {
		ew.printf("kewplan plans %s, in dependency order. Config digest %s.\n", count(len(doc.Nodes), "node", "nodes"), doc.ConfigDigest)
	}
	k := planKubernetes(doc)
	if k != nil {
		writePlanKubernetesHead(ew, k)
	}
	for i := range doc.Nodes {
		n := &doc.Nodes[i]
		ew.printf("\nnode %s\n", nodeLabel(n.Name))
		for _, f := range planNodeFacts(n) {
			if k != nil && f[0] == "isolation" {
				continue // Docker's runtime; the Job's runtime class is shown below
			}
			ew.printf("  %-12s %s\n", f[0], f[1])
		}
		if k != nil {
			writePlanKubernetesNode(ew, n, k)
			continue
		}
		if note := planArgvNote(n); note != "" {
			ew.printf("  %-12s %s\n", "argv", note)
			continue
		}
		ew.printf("  argv\n")
		lines := argvLines(n.Argv)
		for k, l := range lines {
			indent := "      "
			if k == 0 {
				indent = "    "
			}
			if k < len(lines)-1 {
				l += " \\"
			}
			ew.printf("%s%s\n", indent, l)
		}
	}
	writePlanResumeHuman(ew, doc.Resume)
	if len(doc.Exposure) > 0 {
		ew.printf("\nCredential exposure\n")
		names := make([]string, 0, len(doc.Exposure))
		width := len("CREDENTIAL")
		for c := range doc.Exposure {
			names = append(names, c)
			width = max(width, len(c))
		}
		sort.Strings(names)
		_, brokered := exposureModes(doc)
		ew.printf("  %-*s  %s\n", width, "CREDENTIAL", "NODES")
		for _, c := range names {
			ew.printf("  %-*s  %s\n", width, c, exposureCell(doc.Exposure[c], setOf(brokered[c])))
		}
		if len(brokered) > 0 {
			ew.printf("  (brokered: the node's container holds a placeholder and can only use the credential through kewplan's proxy; the others hold the value)\n")
		}
	}
	if len(doc.Nodes) > 0 {
		ew.printf("\nCredentials and egress\n")
		for i := range doc.Nodes {
			ew.printf("  %s\n", reachSentence(&doc.Nodes[i]))
		}
	}
	if len(doc.Nodes) > 0 {
		ew.printf("\nWhere the work lands\n")
		for _, rw := range doc.Writes() {
			ew.printf("  %s\n", writesLine(rw))
		}
	}
	writeBudgetHuman(ew, doc)
	if k != nil {
		writePlanKubernetesTail(ew, k)
	}
	if len(diags) > 0 && ew.err == nil {
		ew.printf("\n")
		ew.err = writeDiagnosticJSONHuman(ew.w, diags, false)
	}
	ew.printf("\n%s\n", planSummaryLine(counts))
	return ew.err
}

// WritePlanMarkdown writes the plan as a pull-request comment: a table of nodes, the exposure, the diagnostics,
// and each argv in a collapsible section.
func WritePlanMarkdown(w io.Writer, doc *jsonplan.Document) error {
	ew := &planWriter{w: w}
	diags := planDiagnostics(doc.Diagnostics)
	counts := countPlan(doc, diags)
	ew.printf("## kewplan plan\n\n%s\n\nConfig digest: `%s`\n", planSummaryLine(counts), doc.ConfigDigest)
	k := planKubernetes(doc)
	if k != nil {
		ew.printf("\n%s\n", planKubernetesMarkdownHead(k))
	}
	if len(doc.Nodes) > 0 {
		ew.printf("\n| Node | Runner | Role | Image | Network | Isolation | Model | Prompt | Credentials | Depends on |\n")
		ew.printf("|---|---|---|---|---|---|---|---|---|---|\n")
		for i := range doc.Nodes {
			n := &doc.Nodes[i]
			facts := map[string]string{}
			for _, f := range planNodeFacts(n) {
				facts[f[0]] = f[1]
			}
			isolation := facts["isolation"]
			if k != nil {
				// On Kubernetes the isolation is the pod's runtime class, not a Docker runtime.
				isolation = "cluster default runtime"
				if nd := k.Node(n.Name); nd != nil && nd.RuntimeClass != "" {
					isolation = "runtimeClassName " + nd.RuntimeClass
				}
			}
			prompt := mdText(facts["prompt"])
			if n.Prompt.SHA256 != "" {
				prompt = fmt.Sprintf("%s (%s)", mdCode(n.Prompt.SHA256[:min(12, len(n.Prompt.SHA256))]+"…"),
					count(n.Prompt.Bytes, "byte", "bytes"))
			}
			ew.printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", mdCode(n.Name), mdText(facts["runner"]),
				mdText(facts["role"]), planMDCode(facts["image"]), mdText(facts["network"]), mdText(isolation), planMDCode(facts["model"]),
				prompt, mdCodeList(n.Credentials), mdText(strings.Join(n.DependsOn, ", ")))
		}
	}
	writePlanRetryMarkdown(ew, doc)
	writePlanResumeMarkdown(ew, doc.Resume)
	if len(doc.Exposure) > 0 {
		ew.printf("\n### Credential exposure\n\n| Credential | Nodes |\n|---|---|\n")
		names := make([]string, 0, len(doc.Exposure))
		for c := range doc.Exposure {
			names = append(names, c)
		}
		sort.Strings(names)
		_, brokered := exposureModes(doc)
		for _, c := range names {
			ew.printf("| %s | %s |\n", mdCode(c), mdText(exposureCell(doc.Exposure[c], setOf(brokered[c]))))
		}
		if len(brokered) > 0 {
			ew.printf("\n_Brokered: the node's container holds a placeholder and can only use the credential through kewplan's proxy; the others hold the value._\n")
		}
	}
	if len(doc.Nodes) > 0 {
		ew.printf("\n### Credentials and egress\n\n")
		for i := range doc.Nodes {
			ew.printf("- %s\n", mdText(reachSentence(&doc.Nodes[i])))
		}
	}
	if len(doc.Nodes) > 0 {
		ew.printf("\n### Where the work lands\n\n| Node | Repository | Ref | Pushes to |\n|---|---|---|---|\n")
		for i := range doc.Nodes {
			n := &doc.Nodes[i]
			facts := map[string]string{}
			for _, f := range planNodeFacts(n) {
				facts[f[0]] = f[1]
			}
			ew.printf("| %s | %s | %s | %s |\n", mdCode(n.Name), planMDCode(facts["repository"]), planMDCode(facts["ref"]), mdText(facts["pushes to"]))
		}
		ew.printf("\n")
		for _, rw := range doc.Writes() {
			ew.printf("- %s\n", mdText(writesLine(rw)))
		}
	}
	writeBudgetMarkdown(ew, doc)
	if len(diags) > 0 {
		ew.printf("\n### Diagnostics\n\n")
		for _, d := range diags {
			title := "Error"
			if d.Severity == jsonplan.SeverityWarning {
				title = "Warning"
			}
			ew.printf("- **%s: %s**", title, mdText(d.Summary))
			if d.Rule != "" {
				ew.printf(" (`%s`)", d.Rule)
			}
			if loc := planDiagLocation(d); loc != "" {
				ew.printf(" at %s", mdCode(loc))
			}
			if d.Detail != "" {
				ew.printf(": %s", mdText(d.Detail))
			}
			ew.printf("\n")
		}
	}
	if k != nil {
		writePlanKubernetesMarkdown(ew, doc, k)
		return ew.err
	}
	if len(doc.Nodes) > 0 {
		ew.printf("\n### Container argv\n")
		for i := range doc.Nodes {
			n := &doc.Nodes[i]
			ew.printf("\n<details><summary><code>%s</code></summary>\n\n", mdHTML(n.Name))
			if note := planArgvNote(n); note != "" {
				ew.printf("%s\n\n</details>\n", mdText(note))
				continue
			}
			body := strings.Join(argvLines(n.Argv), " \\\n  ")
			fence := mdFence(body)
			ew.printf("%ssh\n%s\n%s\n\n</details>\n", fence, body, fence)
		}
	}
	return ew.err
}

// planMDCode renders a value in code, unless it is a placeholder such as "(none)".
func planMDCode(s string) string {
	if strings.HasPrefix(s, "(") || s == "" {
		return mdText(s)
	}
	return mdCode(s)
}

// planWriter keeps the first write error, so renderers can print line by line and check once.
type planWriter struct {
	w   io.Writer
	err error
	// escaped says the caller already escaped every value (termsafe.String) and the format may carry the view's
	// own colour sequences, which printf must then write as they are.
	escaped bool
}

// printf escapes what it writes (termsafe.Text): every value of a plan document may come from a configuration
// or a plan file under review, and must not reach the reader's terminal as control characters.
func (e *planWriter) printf(format string, args ...any) {
	if e.err != nil {
		return
	}
	if e.escaped {
		_, e.err = fmt.Fprintf(e.w, format, args...)
		return
	}
	_, e.err = io.WriteString(e.w, termsafe.Text(fmt.Sprintf(format, args...)))
}

// nodeLabel names a node in human text the way its plan section heads it: "fix" quoted, or an instance address
// as written in HCL (fix["api"], shard[2]), whose key the planner already quoted and escaped.
func nodeLabel(name string) string {
	if strings.ContainsRune(name, '[') {
		return name
	}
	return strconv.Quote(name)
}

// writePlanRetryMarkdown lists the nodes a retry block applies to; nothing when none does.
func writePlanRetryMarkdown(ew *planWriter, doc *jsonplan.Document) {
	header := false
	for i := range doc.Nodes {
		n := &doc.Nodes[i]
		if n.Retry == nil {
			continue
		}
		if !header {
			ew.printf("\n### Retry\n\n| Node | Policy |\n|---|---|\n")
			header = true
		}
		ew.printf("| %s | %s |\n", mdCode(n.Name), mdText(planRetryText(n.Retry)))
	}
}

// writePlanResumeHuman says which nodes a resume reuses and why the others run; nothing without a resume.
func writePlanResumeHuman(ew *planWriter, r *jsonplan.ResumeDocument) {
	if r == nil {
		return
	}
	ew.printf("\nResume from run %s: %s reused, %s to run\n", termsafe.Flatten(r.FromRun), count(r.Reused, "node", "nodes"), count(r.Run, "node", "nodes"))
	width := 0
	for _, n := range r.Nodes {
		width = max(width, len(n.Node))
	}
	for _, n := range r.Nodes {
		ew.printf("  %-5s  %-*s  %s\n", n.Action, width, n.Node, termsafe.Flatten(n.Reason))
	}
}

// writePlanResumeMarkdown is writePlanResumeHuman's table.
func writePlanResumeMarkdown(ew *planWriter, r *jsonplan.ResumeDocument) {
	if r == nil {
		return
	}
	ew.printf("\n### Resume from %s\n\n%s reused, %s to run.\n\n| Node | Action | Why |\n|---|---|---|\n", mdCode(r.FromRun),
		count(r.Reused, "node", "nodes"), count(r.Run, "node", "nodes"))
	for _, n := range r.Nodes {
		ew.printf("| %s | %s | %s |\n", mdCode(n.Node), n.Action, mdText(n.Reason))
	}
}

func setOf(names []string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}
