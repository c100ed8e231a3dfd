package planner

// RuleCredentialTooShortToMask is raised where credential values are known, by apply's preflight: the planner
// never reads them. A value shorter than the masker's minimum would rewrite ordinary text if masked, so it is
// not, and this warning is the only place that says so.
const RuleCredentialTooShortToMask = "credential-too-short-to-mask"

func init() {
	RegisterRules(Rule{
		ID: RuleCredentialTooShortToMask, Severity: SeverityWarning,
		Summary:     "Credential too short to mask",
		Description: "A forwarded credential's value is shorter than 6 bytes, the shortest value kewplan masks in a node's logs, transcript and ledger: masking so short a string would rewrite ordinary text all through the stream. Such a value is forwarded to the agent and shown in clear wherever the agent prints it. Apply's preflight raises this warning, since only apply reads the values, and only for a node whose credentials are forwarded: a brokered node's container holds placeholders, never the values.",
		Help:        "Set the credential to its real value (real keys are far longer), or unset it so that it is not forwarded.",
	})
}
