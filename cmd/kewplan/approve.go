package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/kewplan/kewplan/approval"
	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/internal/safefile"
	"github.com/kewplan/kewplan/internal/termsafe"
	"github.com/kewplan/kewplan/plandiff"
	"github.com/kewplan/kewplan/planfile"
	"github.com/kewplan/kewplan/planner"
	"github.com/kewplan/kewplan/views"
)

// ApproveCmd is `kewplan approve PLANFILE --key KEYFILE [--policy FILE] [--json]`.
type ApproveCmd struct {
	PlanFile string `arg:"" name:"planfile" help:"A plan saved with kewplan plan --out."`
	Key      string `name:"key" required:"" placeholder:"KEYFILE" help:"Your SSH key: a private key without a passphrase, or a public key (.pub) whose private half ssh-agent holds."`
	Policy   string `name:"policy" env:"KEWPLAN_POLICY" placeholder:"FILE" help:"Check the plan against the organisation policy in FILE first, as apply --policy does (policy-mismatch when it was made with another)."`
	JSON     bool   `name:"json" help:"Print the approval as JSON."`
}

// Help shows an example.
func (ApproveCmd) Help() string {
	return "Example:\n  kewplan show review.plan && kewplan approve review.plan --key ~/.ssh/id_ed25519.pub\n\n" +
		"approve checks the plan as show does, signs its digest with your key (an SSH signature in the namespace\n" +
		"kewplan-plan, the format of ssh-keygen -Y sign) and records it in PLANFILE.approvals, replacing an earlier\n" +
		"approval by the same key. apply counts it when the policy's allowed signers list the key."
}

// Run checks the plan, signs its digest and records the approval.
func (c *ApproveCmd) Run(env *Env) error {
	view := views.NewApprove(views.ViewTypeOf(c.JSON), env.streams())
	_, digest, err := checkedSavedPlan(c.PlanFile, c.Policy)
	if err != nil {
		return err
	}
	signer, err := approval.LoadSigner(c.Key, env.Environ)
	if err != nil {
		return err
	}
	e, err := approval.Approve(c.PlanFile, digest, signer)
	if err != nil {
		return err
	}
	af, err := approval.ReadFile(approval.PathFor(c.PlanFile))
	if err != nil {
		return err
	}
	return view.Approved(c.PlanFile, approval.PathFor(c.PlanFile), e, len(af.Approvals))
}

// checkedSavedPlan reads a saved plan and checks it as show and apply do (the document against itself, its
// recorded inputs, its configuration, and with policy the organisation policy), so that nobody signs a plan
// apply would refuse; it returns its digest.
func checkedSavedPlan(name, policy string) (*planfile.File, string, error) {
	f, err := planfile.ReadSaved(name)
	if err != nil {
		return nil, "", err
	}
	if policy != "" {
		src, err := safefile.Read(policy, config.MaxPolicyFileBytes)
		if err != nil {
			return nil, "", fmt.Errorf("--policy: %w", err)
		}
		if err := f.EnforcePolicy(policy, src); err != nil {
			return nil, "", err
		}
	}
	if problems := plandiff.CheckDocument(f.Doc); len(problems) > 0 {
		return nil, "", fmt.Errorf("%w what kewplan plan writes: %s. It was edited after kewplan plan wrote it: do not approve it; run kewplan plan again and review the new plan",
			planfile.ErrMismatch, strings.Join(problems, "; "))
	}
	if _, _, err := f.Reload(); err != nil {
		return nil, "", err
	}
	digest, err := f.Digest()
	if err != nil {
		return nil, "", fmt.Errorf("plan digest: %w", err)
	}
	return f, digest, nil
}

// approvalRequirements are the approvals blocks of a plan's policies: the configuration's own, and the one of
// the policy file policyPath ("" for none), whose blocks are recorded as coming from source. want, when not "",
// is the SHA-256 that file must have (the one a saved plan records, or the bytes apply DIR planned with): the
// policy is read once more here, and must still be the one the plan was checked against. sha is the SHA-256 of
// the file's bytes as read here ("" without one).
func approvalRequirements(cfg *config.Config, policyPath, want, source string) (reqs []requirement, sha string, err error) {
	if cfg.Policy != nil && cfg.Policy.Approvals != nil {
		reqs = append(reqs, requirement{block: cfg.Policy.Approvals, source: approval.SourceConfiguration})
	}
	if policyPath == "" {
		return reqs, "", nil
	}
	pol, files, diags := config.LoadPolicyFile(policyPath)
	if diags.HasErrors() {
		return nil, "", fmt.Errorf("%w: the policy file %s no longer loads", planfile.ErrStale, termsafe.String(policyPath))
	}
	sha = planner.SHA256Hex(files[policyPath])
	if want != "" && sha != want {
		return nil, "", fmt.Errorf("%w: policy file %s changed", planfile.ErrStale, termsafe.String(policyPath))
	}
	if pol != nil && pol.Approvals != nil {
		reqs = append(reqs, requirement{block: pol.Approvals, source: source})
	}
	return reqs, sha, nil
}

// approvalsWhere names an approvals block for people: file:line.
func approvalsWhere(a *config.Approvals) string {
	return fmt.Sprintf("%s:%d", a.DeclRange.Filename, a.DeclRange.Start.Line)
}

// checkPlanApprovals checks the approvals of the saved plan planPath (digest) against each requirement; needed
// says for each whether it applies to this apply (false: "widening" and nothing widens against --base). The
// error names everything that is missing.
func checkPlanApprovals(view views.Approvals, planPath, digest string, reqs []requirement, needed []bool, now time.Time) ([]approval.Approval, error) {
	if len(reqs) == 0 {
		return nil, nil // an approvals file beside a plan no policy asks approvals for is not read
	}
	af, err := approval.ReadFile(approval.PathFor(planPath))
	if err != nil {
		return nil, err
	}
	var valid []approval.Approval
	var problems []string
	for i, rq := range reqs {
		req := rq.block
		signers, err := approval.ReadAllowedSigners(req.AllowedSignersPath)
		if err != nil {
			return nil, fmt.Errorf("the policy's approvals block at %s: %w", approvalsWhere(req), err)
		}
		r := approval.Check(digest, af, signers, req.Required, now)
		if err := view.Approvals(approvalsWhere(req), r, needed[i]); err != nil {
			return nil, err
		}
		if !needed[i] {
			continue
		}
		if err := r.Err(approval.PathFor(planPath)); err != nil {
			problems = append(problems, fmt.Sprintf("%s (approvals block at %s)", err, approvalsWhere(req)))
		}
		valid = appendNew(valid, r.Valid)
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(problems, "\n"))
	}
	return valid, nil
}

// appendNew appends the approvals of more whose key list does not hold yet.
func appendNew(list, more []approval.Approval) []approval.Approval {
	for _, a := range more {
		dup := false
		for _, b := range list {
			dup = dup || a.Key == b.Key
		}
		if !dup {
			list = append(list, a)
		}
	}
	return list
}
