package main

import (
	"github.com/hashicorp/hcl/v2"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/plandiff"
	"github.com/kewplan/kewplan/planner"
	"github.com/kewplan/kewplan/policyrules"
)

// judgePlan evaluates the policies' rules against doc (the plan p as planned) and, with basePath, its change
// against that plan, and adds the findings to both as diagnostics: a deny is an error, so the plan fails and is
// not saved. Without rules it reads nothing but --base and changes nothing. The result is nil without rules.
func judgePlan(env *Env, rules []*config.PolicyRule, doc *jsonplan.Document, p *planner.Plan, basePath string, files []map[string][]byte) (*policyrules.Result, error) {
	var change *plandiff.Diff
	if basePath != "" {
		base, err := readPlanArg(env, basePath, "BASE")
		if err != nil {
			return nil, err
		}
		if len(rules) > 0 {
			change = plandiff.Compare(basePath, base, "HEAD", doc)
		}
	}
	if len(rules) == 0 {
		return nil, nil
	}
	res := policyrules.Evaluate(rules, policyrules.Input{Plan: doc, Change: change})
	addFindings(res.Diagnostics(), doc, p, files)
	return res, nil
}

// addFindings adds the rules' findings to the plan's diagnostics and to its document's.
func addFindings(diags hcl.Diagnostics, doc *jsonplan.Document, p *planner.Plan, files []map[string][]byte) {
	if len(diags) == 0 {
		return
	}
	if p != nil {
		p.Diagnostics = append(p.Diagnostics, diags...)
	}
	doc.Diagnostics = append(doc.Diagnostics, jsonplan.NewDiagnostics(diags, files...)...)
}
