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
	"github.com/kewplan/kewplan/planner"
	"github.com/kewplan/kewplan/views"
)

// approvalState is what apply's approval gate decided, for the receipt.
type approvalState struct {
	approval.Gate
	receiptSigner ssh.Signer // --sign-receipt; nil: the receipt is not signed
}

// gate runs before anything starts (no preflight, no container, no ledger run): it loads the --sign-receipt key,
// says which organisation policy is enforced, and checks the approvals the plan's policies ask for. The
// organisation policy is --policy (KEWPLAN_POLICY), never one the plan chose: without it, a saved plan's recorded
// policy is still checked (it can only ask for more), but apply and the receipt say that no organisation policy
// was enforced. A saved plan's approvals are checked against its digest; an unsaved plan (apply DIR) has none,
// so a policy that asks for approvals refuses it.
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
		return c.gateUnsaved(a, env, av)
	}
	digest, err := a.file.Digest()
	if err != nil {
		return fmt.Errorf("plan digest: %w", err)
	}
	a.gate.Plan = approval.ReceiptPlan{Digest: digest, File: c.Path, Saved: true}
	policyPath, want, source := c.Policy, "", approval.SourcePolicy
	if s := a.file.Doc.Saved.Policy; s != nil {
		want = s.SHA256 // with --policy, EnforcePolicy checked that it is that file's
	}
	if c.Policy == "" {
		policyPath, source = a.file.PolicyLocation(), approval.SourceSavedPlan
	}
	reqs, sha, err := approvalRequirements(a.cfg, policyPath, want, source)
	if err != nil {
		return err
	}
	if err := c.notePolicy(av, a, sha, a.file.PolicyLocation()); err != nil {
		return err
	}
	needed, err := c.approvalsNeeded(env, a, reqs, a.file.Doc)
	if err != nil {
		return err
	}
	a.gate.Requirements = receiptRequirements(reqs, needed)
	a.gate.Approvals, err = checkPlanApprovals(av, c.Path, digest, reqs, needed, time.Now())
	return err
}

// gateUnsaved is the gate of apply DIR: a policy that asks for approvals refuses it, since only a saved plan can
// be approved.
func (c *ApplyCmd) gateUnsaved(a *toApply, env *Env, av views.Approvals) error {
	doc := jsonplan.NewDocument(a.plan, version)
	digest, err := planfile.DocumentDigest(doc)
	if err != nil {
		return fmt.Errorf("plan digest: %w", err)
	}
	a.gate.Plan = approval.ReceiptPlan{Digest: digest}
	reqs, _, err := approvalRequirements(a.cfg, c.Policy, planner.SHA256Hex(a.policySrc), approval.SourcePolicy)
	if err != nil {
		return err
	}
	if err := c.notePolicy(av, a, planner.SHA256Hex(a.policySrc), ""); err != nil {
		return err
	}
	needed, err := c.approvalsNeeded(env, a, reqs, doc)
	if err != nil {
		return err
	}
	for i, req := range reqs {
		if needed[i] {
			return fmt.Errorf("%w: the policy's approvals block at %s asks for %d %s, and only a saved plan can be approved. Run kewplan plan --out FILE, have it approved with kewplan approve FILE --key KEY, then kewplan apply FILE",
				approval.ErrNotApproved, approvalsWhere(req.block), req.block.Required, plural(int64(req.block.Required), "approval", "approvals"))
		}
	}
	a.gate.Requirements = receiptRequirements(reqs, needed)
	return nil
}

// notePolicy records and shows which organisation policy apply enforces: --policy with the SHA-256 of its bytes,
// or none (recorded: the policy a saved plan names, which it chose itself).
func (c *ApplyCmd) notePolicy(av views.Approvals, a *toApply, sha, recorded string) error {
	if c.Policy == "" {
		a.gate.Policy = approval.ReceiptPolicy{}
	} else {
		a.gate.Policy = approval.ReceiptPolicy{Enforced: true, Path: c.Policy, SHA256: sha}
	}
	return av.Policy(a.gate.Policy, recorded)
}

// requirement is one approvals block apply checks, and which policy it came from (approval.Source*).
type requirement struct {
	block  *config.Approvals
	source string
}

// receiptRequirements are reqs as the receipt records them.
func receiptRequirements(reqs []requirement, needed []bool) []approval.Requirement {
	out := []approval.Requirement{}
	for i, r := range reqs {
		out = append(out, approval.Requirement{Source: r.source, Block: approvalsWhere(r.block), Required: r.block.Required,
			When: r.block.When, AllowedSigners: r.block.AllowedSignersPath, Applied: needed[i]})
	}
	return out
}

// approvalsNeeded says for each requirement whether it applies: always for "always"; for "widening", unless
// --base names a plan against which head widens nothing (without --base, kewplan cannot tell, so it asks); for
// "review", as for "widening" and also whenever a review-level rule matched.
func (c *ApplyCmd) approvalsNeeded(env *Env, a *toApply, reqs []requirement, head *jsonplan.Document) ([]bool, error) {
	needed := make([]bool, len(reqs))
	var widened *bool
	for i, req := range reqs {
		needed[i] = true
		if req.block.When == config.ApprovalsAlways || c.Base == "" {
			continue
		}
		if req.block.When == config.ApprovalsReview && a.judged.NeedsReview() {
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
	r := approval.NewReceipt(sum, a.gate.Gate, version)
	if err := approval.WriteReceipt(name, r, a.gate.receiptSigner); err != nil {
		return fmt.Errorf("the run %s ended (%s), and its receipt could not be written: %w", sum.RunID, sum.Status, err)
	}
	return views.NewApprovals(views.ViewTypeOf(c.JSON), env.streams()).ReceiptWritten(name, a.gate.receiptSigner != nil)
}

// startReceipts writes the run's start receipt before the run is recorded (signed like the final one: should the
// apply die, the receipt of its run is made from it), and, as the run starts, the receipts of the dead applies'
// runs the apply's sweep has just marked interrupted (ledgerReceipts; the apply holds the state directory's
// lock). What it could not write of those is kept as warnings, shown when the apply returns.
type startReceipts struct {
	executor.NilHook
	a        *toApply
	stateDir string
	warnings []string
}

// write writes the start receipt of run id (executor.ApplyOptions.RunStarting).
func (h *startReceipts) write(id string, started time.Time) error {
	d, err := statedir.New(h.stateDir)
	if err == nil {
		err = approval.WriteReceipt(d.StartReceipt(id), approval.StartReceipt(id, started, h.a.gate.Gate, version), h.a.gate.receiptSigner)
	}
	if err != nil {
		return fmt.Errorf("the start receipt of run %s could not be written, so the run was not started: %w", id, err)
	}
	return nil
}

func (h *startReceipts) ApplyStart(executor.ApplyStartEvent) {
	if d, err := statedir.New(h.stateDir); err == nil {
		h.warnings = append(h.warnings, ledgerReceipts(d)...)
	}
}
