package main

import (
	"time"

	"github.com/kewplan/kewplan/approval"
	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/planfile"
	"github.com/kewplan/kewplan/views"
)

// showApprovals lists, after a saved plan shown for people, the approvals apply would count and those it would
// not. JSON and markdown output are the plan document alone.
func (c *ShowCmd) showApprovals(env *Env, f *planfile.File, cfg *config.Config) error {
	if planFormat(c.Format, c.JSON) != "human" {
		return nil
	}
	av := views.NewApprovals(views.ViewTypeOf(false), env.streams())
	want := ""
	if s := f.Doc.Saved.Policy; s != nil {
		want = s.SHA256
	}
	reqs, _, err := approvalRequirements(cfg, f.PolicyLocation(), want, approval.SourceSavedPlan)
	if err != nil {
		return err
	}
	name := approval.PathFor(c.PlanFile)
	af, err := approval.ReadFile(name)
	if err != nil {
		return err
	}
	if len(reqs) == 0 {
		if len(af.Approvals) > 0 {
			return av.Unchecked(name, len(af.Approvals))
		}
		return nil
	}
	digest, err := f.Digest()
	if err != nil {
		return err
	}
	for _, rq := range reqs {
		req := rq.block
		signers, err := approval.ReadAllowedSigners(req.AllowedSignersPath)
		if err != nil {
			return err
		}
		r := approval.Check(digest, af, signers, req.Required, time.Now())
		if err := av.Approvals(approvalsWhere(req), r, req.When == config.ApprovalsAlways); err != nil {
			return err
		}
	}
	return nil
}
