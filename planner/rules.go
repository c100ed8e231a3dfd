package planner

import (
	"sort"
	"sync"

	"github.com/hashicorp/hcl/v2"
)

// Rule ids of the fail-closed catalogue. They are stable: JSON plans, SARIF reports and policy reviews key on
// them, so an id is never renamed or reused.
const (
	RuleUnknownRunner          = "unknown-runner"
	RuleUnmappedRunner         = "unmapped-runner"
	RuleCredentiallessRunner   = "credentialless-runner"
	RuleCredentialByValue      = "credential-by-value"
	RuleHostOwnedArg           = "host-owned-arg"
	RuleModelNotRouted         = "model-not-routed"
	RuleEmptyPrompt            = "empty-prompt"
	RuleDependencyCycle        = "dependency-cycle"
	RuleUnknownDependency      = "unknown-dependency"
	RuleOpenNetworkCredentials = "open-network-credentials"
	RuleImageNotPinned         = "image-not-pinned"
	RuleNoMemoryLimit          = "no-memory-limit"
	RuleBudgetUnpriced         = "budget-unpriced"
	RuleBudgetTurnsUnseen      = "budget-turns-unseen"
)

// Severity of a rule, as written in JSON and SARIF.
const (
	SeverityError   = "error"
	SeverityWarning = "warning"
)

// Rule is one entry of the catalogue: what SARIF calls a reportingDescriptor.
type Rule struct {
	ID          string `json:"id"`
	Severity    string `json:"severity"`
	Summary     string `json:"summary"`     // short title, as in the diagnostics it raises
	Description string `json:"description"` // why kewplan refuses (or warns about) it
	Help        string `json:"help"`        // how to fix it
}

// DiagSeverity is the hcl severity of the rule.
func (r Rule) DiagSeverity() hcl.DiagnosticSeverity {
	if r.Severity == SeverityWarning {
		return hcl.DiagWarning
	}
	return hcl.DiagError
}

var catalogue = []Rule{
	{
		ID: RuleUnknownRunner, Severity: SeverityError,
		Summary:     "Unknown runner",
		Description: "The node names a runner that is neither built in nor declared in a runner block, so kewplan cannot tell which credentials, arguments and stdout vocabulary it has.",
		Help:        "Use a built-in runner (kewplan runners lists them) or declare a runner block with that name.",
	},
	{
		ID: RuleUnmappedRunner, Severity: SeverityError,
		Summary:     "Runner has no image",
		Description: "A contained node needs an image built for its runner. The legacy single sandbox image serves claude-code only: routing another runner into it hands that runner's model and flags to the claude CLI, which fails at once (the dead combination the container contract warns about).",
		Help:        "Map the runner to its image in the sandbox block: images = { <runner> = \"<image>@sha256:...\" }.",
	},
	{
		ID: RuleCredentiallessRunner, Severity: SeverityError,
		Summary:     "Runner declares no credential",
		Description: "The runner declares no in-container credential, so the agent inside the container could not authenticate to its model provider; kewplan refuses it rather than contain a dispatch that can only fail.",
		Help:        "Declare the environment variable names the agent authenticates with (credentials = [\"NAME\"]), or route the node to a runner that declares them.",
	},
	{
		ID: RuleCredentialByValue, Severity: SeverityError,
		Summary:     "Credential is not a bare environment name",
		Description: "Credentials are forwarded into the container by name only (-e NAME), with the value inherited from the host environment. A value written in configuration would land in argv, process listings, logs and plans; an entry with spaces or a leading dash would be read by docker as another flag.",
		Help:        "Write only the variable's name, matching ^[A-Za-z_][A-Za-z0-9_]*$, and set its value in the environment that runs kewplan apply.",
	},
	{
		ID: RuleHostOwnedArg, Severity: SeverityError,
		Summary:     "Runner argument belongs to the host",
		Description: "The container args reach the agent unmodified. The prompt is delivered through /work/.kew-prompt.txt, never argv; a session resume (--resume, --continue, --session-id) refers to host state that does not exist inside the container; and /work is the container's only host mount, so an absolute path elsewhere means nothing there.",
		Help:        "Remove the argument from the runner's args; keep paths under /work.",
	},
	{
		ID: RuleModelNotRouted, Severity: SeverityError,
		Summary:     "Model does not reach the container",
		Description: "Every node routes a model, and the runner's args must carry it into the container; routing that reaches only the run record and not the agent silently runs another model (the #761 class).",
		Help:        "Set the node's model attribute, and make the runner's args include it, e.g. args = [\"--model\", model].",
	},
	{
		ID: RuleEmptyPrompt, Severity: SeverityError,
		Summary:     "Empty prompt",
		Description: "The prompt is empty or only whitespace; a promptless agent exits at once and burns the dispatch.",
		Help:        "Give the node a prompt, e.g. prompt = file(\"prompts/<node>.md\").",
	},
	{
		ID: RuleDependencyCycle, Severity: SeverityError,
		Summary:     "Dependency cycle",
		Description: "The nodes depend on each other in a cycle, so no order can run them.",
		Help:        "Remove one of the depends_on entries or node.<name> references that close the cycle.",
	},
	{
		ID: RuleUnknownDependency, Severity: SeverityError,
		Summary:     "Unknown dependency",
		Description: "The node depends on a node that is not declared.",
		Help:        "Declare the node, or correct the name in depends_on.",
	},
	{
		ID: RuleOpenNetworkCredentials, Severity: SeverityWarning,
		Summary:     "Credentials forwarded with open network",
		Description: "With network = \"open\" the container has full egress, so a prompt-injected agent can send the credentials it holds anywhere.",
		Help:        "Use network = \"allowlist\" (the default), or accept the exposure knowingly.",
	},
	{
		ID: RuleImageNotPinned, Severity: SeverityWarning,
		Summary:     "Image is not pinned by digest",
		Description: "A tag can be moved to different content after the plan was reviewed, so the image that runs may not be the one that was approved.",
		Help:        "Pin the image by digest: name:tag@sha256:<digest> (docker inspect --format '{{index .RepoDigests 0}}' shows it).",
	},
	{
		ID: RuleNoMemoryLimit, Severity: SeverityWarning,
		Summary:     "No memory limit",
		Description: "Without a memory limit one agent can exhaust the host's memory.",
		Help:        "Set memory in the sandbox block, e.g. memory = \"4g\".",
	},
	{
		ID: RuleBudgetUnpriced, Severity: SeverityError,
		Summary:     "Cost cap on a model without a price",
		Description: "The node caps its cost (max_usd), but its model has no known price and its runner does not report the cost live in its stream, so the cost could never be known while the agent runs: the cap would fail open, and an unknown price is never taken as zero.",
		Help:        "Add a pricing block for the model (pricing \"<model>\" { input = ..., output = ... } in USD per million tokens; kewplan pricing lists the built-in table), or cap tokens (max_tokens) instead of dollars.",
	},
	{
		ID: RuleBudgetTurnsUnseen, Severity: SeverityWarning,
		Summary:     "Turn cap the runner's stream cannot show",
		Description: "The node caps its turns (max_turns), but its runner's stream does not report turns as they happen (Hermes reports none), so the cap cannot stop the run; its other caps and the timeout still do.",
		Help:        "Cap the node's tokens (max_tokens) or cost (max_usd) instead, or route it to a runner whose stream shows turns.",
	},
}

var (
	catalogueMu sync.RWMutex
	// catalogueByID is initialised with the package's variables, before any init function (the policy file's
	// registers its rules from one) runs.
	catalogueByID = indexRules(catalogue)
)

func indexRules(rs []Rule) map[string]int {
	m := make(map[string]int, len(rs))
	for i, r := range rs {
		m[r.ID] = i
	}
	return m
}

// RegisterRules adds rules to the catalogue (the policy checks do, from their own files). It panics on a
// duplicate id: ids are stable and unique by construction, so a duplicate is a bug in kewplan.
func RegisterRules(rs ...Rule) {
	catalogueMu.Lock()
	defer catalogueMu.Unlock()
	for _, r := range rs {
		if _, dup := catalogueByID[r.ID]; dup {
			panic("planner: duplicate rule id " + r.ID)
		}
		catalogueByID[r.ID] = len(catalogue)
		catalogue = append(catalogue, r)
	}
}

// Rules returns the whole catalogue, sorted by id.
func Rules() []Rule {
	catalogueMu.RLock()
	out := append([]Rule(nil), catalogue...)
	catalogueMu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// LookupRule returns the catalogue entry of id.
func LookupRule(id string) (Rule, bool) {
	catalogueMu.RLock()
	defer catalogueMu.RUnlock()
	i, ok := catalogueByID[id]
	if !ok {
		return Rule{}, false
	}
	return catalogue[i], true
}

// RuleRef is the hcl.Diagnostic.Extra of every diagnostic a rule raises; views read its id through RuleID.
type RuleRef struct{ ID string }

// RuleID names the rule that raised the diagnostic.
func (r RuleRef) RuleID() string { return r.ID }

// DiagnosticRuleID returns the rule id carried by d's Extra, or "" when d was not raised by a rule.
func DiagnosticRuleID(d *hcl.Diagnostic) string {
	if x, ok := d.Extra.(interface{ RuleID() string }); ok {
		return x.RuleID()
	}
	return ""
}

// NewDiagnostic raises rule id at subject (nil when there is no source range). detail says what is wrong in this
// instance; the rule's help is appended so every diagnostic says how to fix it.
func NewDiagnostic(id string, subject *hcl.Range, detail string) *hcl.Diagnostic {
	r, ok := LookupRule(id)
	if !ok {
		panic("planner: unknown rule id " + id)
	}
	if r.Help != "" {
		detail += " " + r.Help
	}
	return &hcl.Diagnostic{
		Severity: r.DiagSeverity(),
		Summary:  r.Summary,
		Detail:   detail,
		Subject:  subject,
		Extra:    RuleRef{ID: id},
	}
}

// rangePtr returns a pointer to a copy of r, or nil when r is the zero range (nothing was written).
func rangePtr(r hcl.Range) *hcl.Range {
	if r.Filename == "" {
		return nil
	}
	return &r
}
