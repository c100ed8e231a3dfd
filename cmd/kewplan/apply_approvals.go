package main

import (
	"fmt"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/kewplan/kewplan/approval"
	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/executor"
	"github.com/kewplan/kewplan/executor/statedir"
	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/plandiff"
	"github.com/kewplan/kewplan/planfile"
	"github.com/kewplan/kewplan/views"
)

// approvalState is what apply's approval gate decided, for the receipt.
type approvalState struct {
	receiptPlan   approval.ReceiptPlan
	approvals     []approval.Approval
	receiptSigner ssh.Signer // --sign-receipt; nil: the receipt is not signed
}

// gate runs before anything starts (no preflight, no container, no ledger run): it loads the --sign-receipt key,
// and checks the approvals the plan's policies ask for. A saved plan's approvals are checked against its digest;
// an unsaved plan (apply DIR) has none, so a policy that asks for approvals refuses it.
func (c *ApplyCmd) gate(env *Env, a *toApply) error {
	if c.SignReceipt != "" {
		s, err := approval.LoadSigner(c.SignReceipt, env.Environ)
		if err != nil {
			return fmt.Errorf("--sign-receipt: %w", err)
		}
		a.gate.receiptSigner = s
	}
	av := views.NewApprovals(views.ViewTypeOf(c.JSON), env.streams())
	if a.file == nil {
		doc := jsonplan.NewDocument(a.plan, version)
		digest, err := planfile.DocumentDigest(doc)
		if err != nil {
			return fmt.Errorf("plan digest: %w", err)
		}
		a.gate.receiptPlan = approval.ReceiptPlan{Digest: digest}
		reqs, err := approvalRequirements(a.cfg, c.Policy, "")
		if err != nil {
			return err
		}
		needed, err := c.approvalsNeeded(env, reqs, doc)
		if err != nil {
			return err
		}
		for i, req := range reqs {
			if needed[i] {
				return fmt.Errorf("%w: the policy's approvals block at %s asks for %d %s, and only a saved plan can be approved. Run kewplan plan --out FILE, have it approved with kewplan approve FILE --key KEY, then kewplan apply FILE",
					approval.ErrNotApproved, approvalsWhere(req), req.Required, plural(int64(req.Required), "approval", "approvals"))
			}
		}
		return nil
	}
	digest, err := a.file.Digest()
	if err != nil {
		return fmt.Errorf("plan digest: %w", err)
	}
	a.gate.receiptPlan = approval.ReceiptPlan{Digest: digest, File: c.Path, Saved: true}
	want := ""
	if s := a.file.Doc.Saved.Policy; s != nil {
		want = s.SHA256
	}
	reqs, err := approvalRequirements(a.cfg, a.file.PolicyLocation(), want)
	if err != nil {
		return err
	}
	needed, err := c.approvalsNeeded(env, reqs, a.file.Doc)
	if err != nil {
		return err
	}
	a.gate.approvals, err = checkPlanApprovals(av, c.Path, digest, reqs, needed, time.Now())
	return err
}

// approvalsNeeded says for each requirement whether it applies: always for "always"; for "widening", unless
// --base names a plan against which head widens nothing (without --base, kewplan cannot tell, so it asks).
func (c *ApplyCmd) approvalsNeeded(env *Env, reqs []*config.Approvals, head *jsonplan.Document) ([]bool, error) {
	needed := make([]bool, len(reqs))
	var widened *bool
	for i, req := range reqs {
		needed[i] = true
		if req.When != config.ApprovalsWidening || c.Base == "" {
			continue
		}
		if widened == nil {
			base, err := readPlanArg(env, c.Base, "BASE")
			if err != nil {
				return nil, err
			}
			w := plandiff.Compare(c.Base, base, c.Path, head).Widened()
			widened = &w
		}
		needed[i] = *widened
	}
	return needed, nil
}

// writeReceipt writes the run's receipt under the state directory, signed with --sign-receipt's key.
func (c *ApplyCmd) writeReceipt(env *Env, a *toApply, stateDir string, sum *executor.ApplySummary) error {
	d, err := statedir.New(stateDir)
	if err != nil {
		return err
	}
	name := d.Receipt(sum.RunID)
	r := approval.NewReceipt(sum, a.gate.receiptPlan, a.gate.approvals, version)
	if err := approval.WriteReceipt(name, r, a.gate.receiptSigner); err != nil {
		return fmt.Errorf("the run %s ended (%s), and its receipt could not be written: %w", sum.RunID, sum.Status, err)
	}
	return views.NewApprovals(views.ViewTypeOf(c.JSON), env.streams()).ReceiptWritten(name, a.gate.receiptSigner != nil)
}
