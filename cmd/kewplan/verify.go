package main

import (
	"time"

	"github.com/kewplan/kewplan/approval"
	"github.com/kewplan/kewplan/planfile"
	"github.com/kewplan/kewplan/views"
)

// VerifyCmd is `kewplan verify RECEIPT --allowed-signers FILE [--plan PLANFILE] [--json]`.
type VerifyCmd struct {
	Receipt        string `arg:"" name:"receipt" help:"A receipt written by kewplan apply: <state-dir>/receipts/RUN.json (its signature is RUN.json.sig)."`
	AllowedSigners string `name:"allowed-signers" required:"" placeholder:"FILE" help:"Who may sign receipts, in git's allowed signers format (namespace kewplan-receipt)."`
	Plan           string `name:"plan" placeholder:"PLANFILE" help:"Also check that the receipt records a run of this saved plan and its approvals."`
	JSON           bool   `name:"json" help:"Print the verified receipt as JSON."`
}

// Help shows an example.
func (VerifyCmd) Help() string {
	return "Example:\n  kewplan verify .kewplan/receipts/RUN.json --allowed-signers ci_signers --plan review.plan\n\n" +
		"Exit status 0 when the receipt's signature is valid by a listed key (and it matches the plan), 1 otherwise."
}

// Run verifies the receipt's signature, then its match with the plan.
func (c *VerifyCmd) Run(env *Env) error {
	view := views.NewVerify(views.ViewTypeOf(c.JSON), env.streams())
	signers, err := approval.ReadAllowedSigners(c.AllowedSigners)
	if err != nil {
		return err
	}
	v, err := approval.VerifyReceipt(c.Receipt, signers, time.Now())
	if err != nil {
		return err
	}
	if c.Plan != "" {
		f, err := planfile.Read(c.Plan)
		if err != nil {
			return err
		}
		digest, err := f.Digest()
		if err != nil {
			return err
		}
		if err := approval.MatchPlan(v.Receipt, f.Doc, digest); err != nil {
			return err
		}
	}
	return view.Verified(c.Receipt, v, c.Plan)
}
