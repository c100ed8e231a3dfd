package views

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/kewplan/kewplan/internal/jsonstream"
	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/plandiff"
	"github.com/kewplan/kewplan/planner"
)

// SARIF 2.1.0, in the subset GitHub code scanning reads
// (https://docs.github.com/en/code-security/code-scanning/integrating-with-code-scanning/sarif-support-for-code-scanning).
const (
	sarifSchema  = "https://json.schemastore.org/sarif-2.1.0.json"
	sarifVersion = "2.1.0"
	// sarifInformationURI is where the tool's documentation lives.
	sarifInformationURI = "https://github.com/kewplan/kewplan"
)

// SARIF categories (runAutomationDetails.id): plan and diff results of one commit are separate analyses, so
// uploading one does not close the other's alerts.
const (
	sarifCategoryPlan = "kewplan/plan/"
	sarifCategoryDiff = "kewplan/diff/"
)

// Rules for diagnostics that no catalogue rule raised (a configuration error found while planning, such as a
// reference to an unknown variable).
const (
	sarifRuleConfigurationError   = "configuration-error"
	sarifRuleConfigurationWarning = "configuration-warning"
)

// sarifSecuritySeverity scores the rules about credentials and container hardening (GitHub: over 9.0 critical,
// 7.0-8.9 high, 4.0-6.9 medium, 0.1-3.9 low). A rule with a score is a security rule and is tagged so.
var sarifSecuritySeverity = map[string]string{
	planner.RuleCredentialByValue:          "9.1",
	planner.RuleOpenNetworkCredentials:     "7.5",
	planner.RuleHostOwnedArg:               "5.0",
	planner.RuleImageNotPinned:             "5.0",
	planner.RuleNoMemoryLimit:              "4.0",
	planner.RulePolicyCredentials:          "8.0",
	planner.RulePolicyAllowedNetworks:      "7.5",
	planner.RulePolicyAllowedImagePrefixes: "6.0",
	planner.RulePolicyRequirePinnedImages:  "5.0",
	planner.RulePolicyMaxPidsLimit:         "4.0",
	plandiff.KindCredentialAdded:           "8.0",
	plandiff.KindNetworkOpened:             "7.5",
	plandiff.KindHardeningLost:             "6.5",
	plandiff.KindImageUnpinned:             "5.0",
	plandiff.KindEgressAdded:               "7.0",
	plandiff.KindProviderFetchWidened:      "7.0",
	planner.RulePolicyProviderFetch:        "7.0",
	plandiff.KindCredentialModeWidened:     "8.0",
	planner.RulePolicyCredentialMode:       "8.0",
	planner.RulePolicyEgress:               "7.0",
	planner.RulePushProtectedBranch:        "7.0",
	planner.RuleProtectedPush:              "5.0",
	planner.RulePolicyPush:                 "7.0",
	plandiff.KindPushWidened:               "7.0",
}

// sarifLog is a SARIF 2.1.0 log.
type sarifLog struct {
	Schema  string     `json:"$schema"`
	Version string     `json:"version"`
	Runs    []sarifRun `json:"runs"`
}

// sarifRun is one run of the tool.
type sarifRun struct {
	Tool              sarifTool              `json:"tool"`
	AutomationDetails sarifAutomationDetails `json:"automationDetails"`
	Results           []sarifResult          `json:"results"`
	// Properties is the run's property bag: a plan's budget (the apply-wide worst case and each node's caps).
	Properties *sarifRunProps `json:"properties,omitempty"`
}

// sarifRunProps are what a plan's SARIF run carries beyond its results.
type sarifRunProps struct {
	Budget *sarifBudget `json:"budget,omitempty"`
	// Writes are where each node's work lands, by node, as in --json.
	Writes map[string]sarifWrite `json:"writes,omitempty"`
	// ProviderFetch are the provider-fetch features of each node that has any, as in --json.
	ProviderFetch map[string][]string `json:"provider_fetch,omitempty"`
}

// sarifWrite is one node's repository, clone ref and push (null for a reviewer).
type sarifWrite struct {
	Repository string                 `json:"repository"`
	Ref        string                 `json:"ref"`
	Push       *jsonplan.PushDocument `json:"push"`
}

// sarifBudget is the plan's budget in a SARIF run: the apply-wide figures and each node's caps, as in --json.
type sarifBudget struct {
	*jsonplan.ApplyBudgetDocument
	Nodes map[string]*jsonplan.BudgetDocument `json:"nodes"`
}

// sarifTool wraps the driver.
type sarifTool struct {
	Driver sarifDriver `json:"driver"`
}

// sarifDriver describes kewplan and its rules.
type sarifDriver struct {
	Name           string      `json:"name"`
	InformationURI string      `json:"informationUri"`
	Version        string      `json:"version"`
	Rules          []sarifRule `json:"rules"`
}

// sarifAutomationDetails carries the analysis category.
type sarifAutomationDetails struct {
	ID string `json:"id"`
}

// sarifRule is a reportingDescriptor.
type sarifRule struct {
	ID                   string             `json:"id"`
	Name                 string             `json:"name"`
	ShortDescription     sarifText          `json:"shortDescription"`
	FullDescription      sarifText          `json:"fullDescription"`
	Help                 sarifHelp          `json:"help"`
	DefaultConfiguration sarifConfiguration `json:"defaultConfiguration"`
	Properties           sarifRuleProps     `json:"properties"`
}

// sarifText is a message string.
type sarifText struct {
	Text string `json:"text"`
}

// sarifHelp is a rule's documentation in text and markdown.
type sarifHelp struct {
	Text     string `json:"text"`
	Markdown string `json:"markdown"`
}

// sarifConfiguration is a rule's default reporting configuration.
type sarifConfiguration struct {
	Level string `json:"level"`
}

// sarifRuleProps are the rule properties GitHub reads.
type sarifRuleProps struct {
	Tags             []string `json:"tags"`
	Precision        string   `json:"precision"`
	SecuritySeverity string   `json:"security-severity,omitempty"`
	ProblemSeverity  string   `json:"problem.severity,omitempty"`
}

// sarifResult is one alert.
type sarifResult struct {
	RuleID              string            `json:"ruleId"`
	RuleIndex           int               `json:"ruleIndex"`
	Level               string            `json:"level"`
	Message             sarifText         `json:"message"`
	Locations           []sarifLocation   `json:"locations"`
	RelatedLocations    []sarifLocation   `json:"relatedLocations,omitempty"`
	PartialFingerprints map[string]string `json:"partialFingerprints"`
}

// sarifLocation is a result's location; a related location (a node a policy rule names) carries a message.
type sarifLocation struct {
	ID               int                   `json:"id,omitempty"`
	PhysicalLocation sarifPhysicalLocation `json:"physicalLocation"`
	Message          *sarifText            `json:"message,omitempty"`
}

// sarifPhysicalLocation is a file and a region of it.
type sarifPhysicalLocation struct {
	ArtifactLocation sarifArtifactLocation `json:"artifactLocation"`
	Region           sarifRegion           `json:"region"`
}

// sarifArtifactLocation names a file relative to the repository root.
type sarifArtifactLocation struct {
	URI string `json:"uri"`
}

// sarifRegion is a span: lines and columns are 1-based, endColumn is the column after the last character.
type sarifRegion struct {
	StartLine   int `json:"startLine"`
	StartColumn int `json:"startColumn"`
	EndLine     int `json:"endLine"`
	EndColumn   int `json:"endColumn"`
}

// SARIFOptions are what the SARIF views need besides the plan or diff.
type SARIFOptions struct {
	KewplanVersion string
	// Source returns a configuration file's text by the name used in ranges; fingerprints hash the line a result
	// is on, so that an alert survives edits elsewhere in the file. Nil or false: the fingerprint rests on the
	// rule, the file and the result's own text.
	Source func(filename string) ([]byte, bool)
	// URI maps a range's file name to the artifact URI; nil keeps the name (forward slashes, no leading "./").
	URI func(filename string) string
	// DefaultURI locates results that carry no range (the configuration path); "" uses the first node's file.
	DefaultURI string
}

// sourcesFromFiles adapts a name -> source map (config.Config.Files) to SARIFOptions.Source.
func sourcesFromFiles(files ...map[string][]byte) func(string) ([]byte, bool) {
	return func(name string) ([]byte, bool) {
		for _, m := range files {
			if src, ok := m[name]; ok {
				return src, true
			}
		}
		return nil, false
	}
}

// newPlanSARIF converts a plan's diagnostics into a SARIF log: one result per diagnostic, under the rule that
// raised it.
func newPlanSARIF(doc *jsonplan.Document, opts SARIFOptions) *sarifLog {
	rules := append(planner.Rules(), configurationRules()...)
	b := newSARIFBuilder(rules, sarifCategoryPlan, opts)
	fallback := opts.DefaultURI
	for _, n := range doc.Nodes {
		if fallback == "" && n.Range != nil {
			fallback = n.Range.Filename
		}
	}
	for _, d := range planDiagnostics(doc.Diagnostics) {
		rule := d.Rule
		b.addPolicyRule(d)
		if _, ok := b.index[rule]; !ok || rule == "" {
			rule = sarifRuleConfigurationError
			if d.Severity == planner.SeverityWarning {
				rule = sarifRuleConfigurationWarning
			}
		}
		level := "error"
		if d.Severity == planner.SeverityWarning {
			level = "warning"
		}
		text := d.Summary
		if d.Detail != "" {
			text += ". " + d.Detail
		}
		// The identity of a plan result is its rule and the line it is on; the detail (which lists nodes) may
		// change without the problem changing. Without a line to hash, the summary stands in.
		discriminator := ""
		if d.Range == nil || d.Snippet == nil {
			discriminator = d.Summary
		}
		b.add(rule, level, text, discriminator, d.Range, d.Snippet, fallback)
		b.relate(d.Policy)
	}
	log := b.log()
	props := &sarifRunProps{}
	if doc.Budget != nil {
		sb := &sarifBudget{ApplyBudgetDocument: doc.Budget, Nodes: map[string]*jsonplan.BudgetDocument{}}
		for _, n := range doc.Nodes {
			sb.Nodes[n.Name] = n.Budget
		}
		props.Budget = sb
	}
	if len(doc.Nodes) > 0 {
		props.Writes = make(map[string]sarifWrite, len(doc.Nodes))
		for _, n := range doc.Nodes {
			props.Writes[n.Name] = sarifWrite{Repository: n.Repository, Ref: n.Ref, Push: n.Push}
		}
	}
	for _, n := range doc.Nodes {
		if len(n.ProviderFetch) > 0 {
			if props.ProviderFetch == nil {
				props.ProviderFetch = map[string][]string{}
			}
			props.ProviderFetch[n.Name] = n.ProviderFetch
		}
	}
	if props.Budget != nil || props.Writes != nil || props.ProviderFetch != nil {
		log.Runs[0].Properties = props
	}
	return log
}

func init() {
	// `kewplan plan --format sarif` and `kewplan show --format sarif`. The plan document carries each
	// diagnostic's source snippet, which is what the fingerprints hash.
	planFormats["sarif"] = func(w io.Writer, doc *jsonplan.Document) error {
		return writePlanSARIF(w, doc, SARIFOptions{KewplanVersion: doc.KewplanVersion})
	}
}

// writePlanSARIF writes a plan's diagnostics as SARIF.
func writePlanSARIF(w io.Writer, doc *jsonplan.Document, opts SARIFOptions) error {
	return jsonstream.Indented(w, newPlanSARIF(doc, opts))
}

// newDiffSARIF converts a diff's widening findings into a SARIF log. Narrowing is not an alert; a diff without
// widening has no results, which closes the alerts of an earlier upload.
func newDiffSARIF(d *plandiff.Diff, opts SARIFOptions) *sarifLog {
	b := newSARIFBuilder(plandiff.Rules(), sarifCategoryDiff, opts)
	for _, f := range d.Exposure {
		if !f.Widening {
			continue
		}
		discriminator := f.Node + "\x00" + f.Credential
		if f.Kind == plandiff.KindHardeningLost {
			discriminator += "\x00" + f.Message
		}
		b.add(f.Kind, "error", f.Message, discriminator, diffRange(f.Range), nil, opts.DefaultURI)
	}
	for _, x := range d.PolicyFindings {
		b.addPolicyRule(x)
		level := "warning"
		if x.Severity == jsonplan.SeverityError {
			level = "error"
		}
		b.add(x.Rule, level, x.Summary+". "+x.Detail, x.Summary, x.Range, x.Snippet, opts.DefaultURI)
		b.relate(x.Policy)
	}
	return b.log()
}

// writeDiffSARIF writes a diff's widening findings as SARIF.
func writeDiffSARIF(w io.Writer, d *plandiff.Diff, opts DiffOptions) error {
	return jsonstream.Indented(w, newDiffSARIF(d, SARIFOptions{KewplanVersion: opts.KewplanVersion, Source: opts.Source, URI: opts.URI}))
}

func configurationRules() []planner.Rule {
	return []planner.Rule{
		{
			ID: sarifRuleConfigurationError, Severity: planner.SeverityError,
			Summary:     "Configuration error",
			Description: "The configuration could not be planned as written: a reference, a type or a function call is wrong. The result's message says what and where.",
			Help:        "Fix the configuration as the message says; kewplan validate shows the same diagnostic with a source snippet.",
		},
		{
			ID: sarifRuleConfigurationWarning, Severity: planner.SeverityWarning,
			Summary:     "Configuration warning",
			Description: "The configuration plans, but something in it is probably not what was meant. The result's message says what and where.",
			Help:        "Read the message; kewplan validate shows the same diagnostic with a source snippet.",
		},
	}
}

// addPolicyRule adds the rule descriptor of an organisation's policy rule the first time one of its findings is
// seen: those rules are the policy's, not kewplan's catalogue.
func (b *sarifBuilder) addPolicyRule(d jsonplan.Diagnostic) {
	if d.Policy == nil || d.Rule == "" {
		return
	}
	if _, ok := b.index[d.Rule]; ok {
		return
	}
	severity := planner.SeverityWarning
	if d.Policy.Level == "deny" || d.Severity == planner.SeverityError {
		severity = planner.SeverityError
	}
	b.index[d.Rule] = len(b.rules)
	b.rules = append(b.rules, newSARIFRule(planner.Rule{
		ID: d.Rule, Severity: severity,
		Summary:     fmt.Sprintf("Policy rule %q (%s)", d.Policy.Rule, d.Policy.Level),
		Description: orText(d.Policy.Message, "A rule of the organisation's policy matched the plan."),
		Help:        "The rule is the organisation's policy: change the plan so that its condition is false, or have the policy changed. kewplan policy test runs the policy's own tests.",
	}))
}

// relate adds the nodes a policy finding names to the last result, as related locations at their blocks.
func (b *sarifBuilder) relate(f *jsonplan.PolicyFinding) {
	if f == nil || len(b.results) == 0 {
		return
	}
	r := &b.results[len(b.results)-1]
	for _, n := range f.Nodes {
		if n.Range == nil || n.Range.Filename == "" || n.Range.Start.Line < 1 {
			continue
		}
		region := sarifRegion{StartLine: n.Range.Start.Line, StartColumn: max(n.Range.Start.Column, 1),
			EndLine: max(n.Range.End.Line, n.Range.Start.Line), EndColumn: max(n.Range.End.Column, 1)}
		if region.EndLine == region.StartLine && region.EndColumn <= region.StartColumn {
			region.EndColumn = region.StartColumn + 1
		}
		r.RelatedLocations = append(r.RelatedLocations, sarifLocation{
			ID:               len(r.RelatedLocations) + 1,
			PhysicalLocation: sarifPhysicalLocation{ArtifactLocation: sarifArtifactLocation{URI: b.uri(n.Range.Filename)}, Region: region},
			Message:          &sarifText{Text: "node " + n.Name},
		})
	}
}

func orText(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
}

// sarifBuilder collects results against a fixed rule list.
type sarifBuilder struct {
	rules   []sarifRule
	index   map[string]int
	results []sarifResult
	seen    map[string]int // fingerprint hash -> occurrences so far
	opts    SARIFOptions
	cat     string
}

func newSARIFBuilder(rules []planner.Rule, category string, opts SARIFOptions) *sarifBuilder {
	b := &sarifBuilder{index: map[string]int{}, seen: map[string]int{}, opts: opts, cat: category}
	for _, r := range rules {
		if _, dup := b.index[r.ID]; dup {
			continue
		}
		b.index[r.ID] = len(b.rules)
		b.rules = append(b.rules, newSARIFRule(r))
	}
	return b
}

func newSARIFRule(r planner.Rule) sarifRule {
	level := "error"
	if r.Severity == planner.SeverityWarning {
		level = "warning"
	}
	props := sarifRuleProps{Tags: []string{"kewplan"}, Precision: "very-high"}
	if s, ok := sarifSecuritySeverity[r.ID]; ok {
		props.SecuritySeverity = s
		props.Tags = append(props.Tags, "security")
	} else {
		props.ProblemSeverity = map[string]string{"error": "error", "warning": "warning"}[level]
	}
	full := r.Description
	if full == "" {
		full = r.Summary
	}
	help := r.Help
	if help == "" {
		help = full
	}
	return sarifRule{
		ID:                   r.ID,
		Name:                 sarifRuleName(r.ID),
		ShortDescription:     sarifText{Text: sarifClip(r.Summary, 1024)},
		FullDescription:      sarifText{Text: sarifClip(full, 1024)},
		Help:                 sarifHelp{Text: full + "\n\n" + help, Markdown: fmt.Sprintf("**%s**\n\n%s\n\n**How to fix:** %s", r.Summary, full, help)},
		DefaultConfiguration: sarifConfiguration{Level: level},
		Properties:           props,
	}
}

// sarifRuleName turns "open-network-credentials" into "OpenNetworkCredentials".
func sarifRuleName(id string) string {
	var b strings.Builder
	for _, part := range strings.Split(id, "-") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}

func sarifClip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// add records a result. discriminator tells apart results of one rule on one line (two credentials added to one
// node); it must not hold a line number.
func (b *sarifBuilder) add(ruleID, level, message, discriminator string, rng *jsonplan.Range, sn *jsonplan.Snippet, fallbackURI string) {
	file := fallbackURI
	region := sarifRegion{StartLine: 1, StartColumn: 1, EndLine: 1, EndColumn: 2}
	if rng != nil && rng.Filename != "" && rng.Start.Line > 0 {
		file = rng.Filename
		region = sarifRegion{StartLine: rng.Start.Line, StartColumn: max(rng.Start.Column, 1),
			EndLine: max(rng.End.Line, rng.Start.Line), EndColumn: rng.End.Column}
		if region.EndLine == region.StartLine && region.EndColumn <= region.StartColumn {
			region.EndColumn = region.StartColumn + 1
		}
		if region.EndColumn < 1 {
			region.EndColumn = 1
		}
	}
	if file == "" {
		file = "."
	}
	uri := b.uri(file)
	line := ""
	switch {
	case ruleID == planner.RuleCredentialByValue || (sn != nil && strings.Contains(sn.Code, jsonplan.RedactedSpan)):
		// The line holds a secret: even a hash of it stays out of the report.
	case b.opts.Source != nil:
		if src, ok := b.opts.Source(file); ok {
			line = sourceLine(src, region.StartLine)
		}
	}
	if line == "" && sn != nil && sn.StartLine > 0 && sn.StartLine <= region.StartLine &&
		ruleID != planner.RuleCredentialByValue && !strings.Contains(sn.Code, jsonplan.RedactedSpan) {
		line = sourceLine([]byte(sn.Code), region.StartLine-sn.StartLine+1)
	}
	h := sha256.New()
	for _, part := range []string{ruleID, uri, normaliseLine(line), discriminator} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	sum := hex.EncodeToString(h.Sum(nil))[:16]
	b.seen[sum]++
	b.results = append(b.results, sarifResult{
		RuleID:    ruleID,
		RuleIndex: b.index[ruleID],
		Level:     level,
		Message:   sarifText{Text: message},
		Locations: []sarifLocation{{PhysicalLocation: sarifPhysicalLocation{
			ArtifactLocation: sarifArtifactLocation{URI: uri},
			Region:           region,
		}}},
		PartialFingerprints: map[string]string{"primaryLocationLineHash": fmt.Sprintf("%s:%d", sum, b.seen[sum])},
	})
}

func (b *sarifBuilder) uri(file string) string {
	if b.opts.URI != nil {
		return b.opts.URI(file)
	}
	return SARIFRelativeURI(file)
}

// SARIFRelativeURI writes a relative file name as a URI reference: forward slashes, no leading "./", and
// characters outside a URI's path escaped.
func SARIFRelativeURI(name string) string {
	name = filepath.ToSlash(name)
	for strings.HasPrefix(name, "./") {
		name = name[2:]
	}
	var b strings.Builder
	for _, c := range []byte(name) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', strings.IndexByte("-._~/!$&'()*+,;=:@", c) >= 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func (b *sarifBuilder) log() *sarifLog {
	results := b.results
	if results == nil {
		results = []sarifResult{}
	}
	return &sarifLog{
		Schema:  sarifSchema,
		Version: sarifVersion,
		Runs: []sarifRun{{
			Tool: sarifTool{Driver: sarifDriver{
				Name: "kewplan", InformationURI: sarifInformationURI, Version: orDev(b.opts.KewplanVersion), Rules: b.rules,
			}},
			AutomationDetails: sarifAutomationDetails{ID: b.cat},
			Results:           results,
		}},
	}
}

func orDev(v string) string {
	if v == "" {
		return "dev"
	}
	return v
}

// sourceLine returns line n (1-based) of src, or "".
func sourceLine(src []byte, n int) string {
	for i := 1; i < n; i++ {
		j := bytes.IndexByte(src, '\n')
		if j < 0 {
			return ""
		}
		src = src[j+1:]
	}
	if j := bytes.IndexByte(src, '\n'); j >= 0 {
		src = src[:j]
	}
	return string(src)
}

// normaliseLine keeps what a line says, not how it is laid out: whitespace runs collapse to one space, so
// re-indenting does not create a new alert.
func normaliseLine(s string) string {
	return strings.Join(strings.FieldsFunc(s, unicode.IsSpace), " ")
}
