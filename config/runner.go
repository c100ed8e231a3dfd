package config

import (
	"fmt"
	"regexp"

	"github.com/hashicorp/hcl/v2"
)

// Protocols are the stdout vocabularies a runner may speak. It mirrors runners.Protocols() (config imports no
// kewplan package); a test keeps the two equal.
var Protocols = []string{"claude-code", "hermes", "opencode", "pi"}

var runnerSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "protocol"},
		{Name: "credentials"},
		{Name: "args"},
		{Name: "endpoints"},
		{Name: "base_url"},
	},
}

// envNamePattern is what a POSIX environment variable's name may be.
var envNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func decodeRunnerBlock(block *hcl.Block) (*Runner, hcl.Diagnostics) {
	name := block.Labels[0]
	var diags hcl.Diagnostics
	if d := checkName("runner", name, block.LabelRanges[0]); d != nil {
		return nil, hcl.Diagnostics{d}
	}
	r := &Runner{Name: name, DeclRange: block.DefRange}
	where := fmt.Sprintf("runner %q", name)
	content, d := bodyContent(block.Body, runnerSchema, "a runner block")
	diags = append(diags, d...)

	if attr, ok := content.Attributes["protocol"]; ok {
		s, d := constString(attr, where)
		diags = append(diags, d...)
		if !d.HasErrors() {
			if !contains(Protocols, s) {
				diags = append(diags, errorDiag("Unknown protocol",
					fmt.Sprintf("The protocol %q of %s is not a stdout vocabulary kewplan can read.%s The protocols are %s; choose the one the agent's output follows.", s, where, didYouMean(s, Protocols), quotedList(Protocols)),
					attr.Expr.Range()))
			} else {
				r.Protocol = s
			}
			r.ProtocolRange = attr.Expr.Range()
		}
	}
	if attr, ok := content.Attributes["credentials"]; ok {
		// Entries are only type-checked here: the planner's credential rules judge names and catch values,
		// without ever echoing them.
		list, ranges, d := constStringList(attr, where)
		diags = append(diags, d...)
		if !d.HasErrors() {
			r.Credentials = list
			r.CredentialRanges = ranges
			if r.Credentials == nil {
				r.Credentials = []string{}
			}
		}
		r.CredentialsRange = attr.Range
	}
	if attr, ok := content.Attributes["args"]; ok {
		r.Args = attr.Expr
	}
	if attr, ok := content.Attributes["endpoints"]; ok {
		list, d := decodeHostPatterns(attr, fmt.Sprintf("the endpoints of %s", where))
		diags = append(diags, d...)
		if list == nil {
			list = []HostPattern{}
		}
		r.Endpoints = list
		r.EndpointsRange = attr.Range
	}
	if attr, ok := content.Attributes["base_url"]; ok {
		s, d := constString(attr, where)
		diags = append(diags, d...)
		if !d.HasErrors() {
			if !envNamePattern.MatchString(s) {
				diags = append(diags, errorDiag("Invalid base URL variable",
					fmt.Sprintf("The base_url of %s is %q, which is not an environment variable's name. base_url names the variable the agent reads its model API's base URL from (Claude Code reads ANTHROPIC_BASE_URL), not the URL itself: kewplan sets it to its egress proxy when credentials are brokered. Write a name of letters, digits and underscores, such as \"ACME_BASE_URL\".", where, s),
					attr.Expr.Range()))
			} else {
				r.BaseURL = s
			}
			r.BaseURLRange = attr.Expr.Range()
		}
	}
	return r, diags
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
