package main

import (
	"fmt"
	"time"

	"github.com/kewplan/kewplan/approval"
	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/internal/termsafe"
	"github.com/kewplan/kewplan/planfile"
	"github.com/kewplan/kewplan/planner"
	"github.com/kewplan/kewplan/views"
)

// VerifyCmd is `kewplan verify RECEIPT --allowed-signers FILE [--plan PLANFILE] [--policy FILE] [--require N]
// [--json]`.
type VerifyCmd struct {
	Receipt        string `arg:"" name:"receipt" help:"A receipt written by kewplan apply: <state-dir>/receipts/RUN.json (its signature is RUN.json.sig)."`
	AllowedSigners string `name:"allowed-signers" required:"" placeholder:"FILE" help:"Who may sign receipts, in git's allowed signers format (namespace kewplan-receipt)."`
	Plan           string `name:"plan" placeholder:"PLANFILE" help:"Also check that the receipt records a run of this saved plan and its approvals."`
	Policy         string `name:"policy" env:"KEWPLAN_POLICY" placeholder:"FILE" help:"Also check that the run asked for and counted the approvals this organisation policy's approvals block asks for, each by a key its allowed signers list."`
	Require        int    `name:"require" placeholder:"N" help:"Also check that the run asked for and counted at least N approvals."`
	JSON           bool   `name:"json" help:"Print the verified receipt as JSON."`
}

// Help shows an example.
func (VerifyCmd) Help() string {
	return "Example:\n  kewplan verify .kewplan/receipts/RUN.json --allowed-signers ci_signers --plan review.plan --policy org/policy.hcl\n\n" +
		"Exit status 0 when the receipt's signature is valid by a listed key (and it matches the plan, and shows the\n" +
		"approvals the policy and --require ask for), 1 otherwise."
}

// Run verifies the receipt's signature, then its match with the plan, then what its run required.
func (c *VerifyCmd) Run(env *Env) error {
	if c.Require < 0 {
		return fmt.Errorf("--require must be a number of approvals, 0 or more, not %d", c.Require)
	}
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
	d, policySHA, err := c.demand()
	if err != nil {
		return err
	}
	if err := approval.CheckDemand(v.Receipt, d); err != nil {
		return err
	}
	return view.Verified(c.Receipt, v, c.Plan, c.Policy, policySHA)
}

// demand is what --policy and --require ask of the receipt, and the SHA-256 of the policy file's bytes.
func (c *VerifyCmd) demand() (approval.Demand, string, error) {
	d := approval.Demand{Require: c.Require}
	if c.Policy == "" {
		return d, "", nil
	}
	pol, files, diags := config.LoadPolicyFile(c.Policy)
	if diags.HasErrors() {
		return d, "", fmt.Errorf("--policy %s does not load: %s", termsafe.String(c.Policy), termsafe.String(diags.Error()))
	}
	if pol != nil && pol.Approvals != nil {
		a := pol.Approvals
		s, err := approval.ReadAllowedSigners(a.AllowedSignersPath)
		if err != nil {
			return d, "", fmt.Errorf("the policy's approvals block at %s: %w", approvalsWhere(a), err)
		}
		d.Approvals = &approval.DemandApprovals{Block: approvalsWhere(a), Required: a.Required, When: a.When, Signers: s}
	}
	return d, planner.SHA256Hex(files[c.Policy]), nil
}
