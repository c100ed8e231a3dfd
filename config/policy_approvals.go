package config

import (
	"fmt"
	"math/big"
	"path/filepath"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// The values of an approvals block's `when`.
const (
	ApprovalsAlways   = "always"   // every saved plan needs its approvals
	ApprovalsWidening = "widening" // only a plan that widens exposure against apply --base BASEPLAN
	// ApprovalsReview: only a plan a review-level rule matched, or that widens exposure against apply --base
	// (without --base kewplan cannot tell that it widens nothing, so it asks).
	ApprovalsReview = "review"
)

// MaxRequiredApprovals bounds `required`: a number past it is a typo, and no signers file lists that many people.
const MaxRequiredApprovals = 100

// Approvals is a policy's `approvals` block: apply runs a saved plan only when Required people listed in the
// allowed signers file signed its digest. Reading and checking the signatures is the approval package's job;
// config only records where the file is.
type Approvals struct {
	Required      int
	RequiredRange hcl.Range
	// AllowedSigners is the path as written; AllowedSignersPath is that path relative to the directory of the
	// file holding the policy block (or absolute), for opening.
	AllowedSigners      string
	AllowedSignersPath  string
	AllowedSignersRange hcl.Range
	When                string // ApprovalsAlways (the default), ApprovalsWidening or ApprovalsReview
	WhenRange           hcl.Range
	DeclRange           hcl.Range
}

var approvalsBlockSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "required", Required: true},
		{Name: "allowed_signers", Required: true},
		{Name: "when"},
	},
}

// decodeApprovalsBlocks decodes the approvals block of a policy block (at most one); nil when there is none.
func decodeApprovalsBlocks(blocks hcl.Blocks, diags *hcl.Diagnostics) *Approvals {
	var out *Approvals
	for _, b := range blocks {
		if b.Type != "approvals" {
			continue
		}
		if out != nil {
			*diags = append(*diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Duplicate approvals block",
				Detail: fmt.Sprintf("An approvals block was already written at %s. A policy asks for approvals "+
					"once: merge the two blocks.", out.DeclRange),
				Subject: b.DefRange.Ptr(),
			})
			continue
		}
		out = decodeApprovalsBlock(b, diags)
	}
	return out
}

func decodeApprovalsBlock(block *hcl.Block, diags *hcl.Diagnostics) *Approvals {
	a := &Approvals{When: ApprovalsAlways, DeclRange: block.DefRange}
	if len(block.Labels) > 0 {
		*diags = append(*diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Unexpected approvals block label",
			Detail:   "An approvals block takes no label. Write `approvals {` without a name.",
			Subject:  block.LabelRanges[0].Ptr(),
		})
	}
	content, moreDiags := bodyContent(block.Body, approvalsBlockSchema, "an approvals block")
	*diags = append(*diags, moreDiags...)
	if attr, ok := content.Attributes["required"]; ok {
		a.RequiredRange = attr.Range
		if v, ok := policyLiteral(attr, cty.Number, diags); ok {
			n, exact := v.AsBigFloat().Int64()
			if exact != big.Exact || n < 1 || n > MaxRequiredApprovals {
				*diags = append(*diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid number of approvals",
					Detail: fmt.Sprintf("required is the number of people who must sign a saved plan before apply "+
						"runs it: a whole number from 1 to %d. Remove the approvals block to ask for none.", MaxRequiredApprovals),
					Subject: attr.Expr.Range().Ptr(),
				})
			} else {
				a.Required = int(n)
			}
		}
	}
	if attr, ok := content.Attributes["allowed_signers"]; ok {
		a.AllowedSignersRange = attr.Range
		if v, ok := policyLiteral(attr, cty.String, diags); ok {
			s := v.AsString()
			if strings.TrimSpace(s) == "" || s != strings.TrimSpace(s) || strings.ContainsRune(s, 0) {
				*diags = append(*diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid allowed_signers path",
					Detail: "allowed_signers names the file listing who may approve a plan, in git's allowed signers " +
						"format, relative to this policy file: a non-empty path without surrounding spaces, such as " +
						"\"allowed_signers\".",
					Subject: attr.Expr.Range().Ptr(),
				})
			} else {
				a.AllowedSigners = s
				a.AllowedSignersPath = filepath.FromSlash(s)
				if !filepath.IsAbs(a.AllowedSignersPath) {
					a.AllowedSignersPath = filepath.Join(filepath.Dir(block.DefRange.Filename), a.AllowedSignersPath)
				}
			}
		}
	}
	if attr, ok := content.Attributes["when"]; ok {
		a.WhenRange = attr.Range
		if v, ok := policyLiteral(attr, cty.String, diags); ok {
			switch w := v.AsString(); w {
			case ApprovalsAlways, ApprovalsWidening, ApprovalsReview:
				a.When = w
			default:
				*diags = append(*diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid approvals condition",
					Detail: fmt.Sprintf("when is %q, %q or %q: approvals for every saved plan, only for one that "+
						"widens exposure against the plan named by apply --base, or only for one a review-level "+
						"rule matched or that widens exposure. %q is none of them.",
						ApprovalsAlways, ApprovalsWidening, ApprovalsReview, printable(w)),
					Subject: attr.Expr.Range().Ptr(),
				})
			}
		}
	}
	return a
}
