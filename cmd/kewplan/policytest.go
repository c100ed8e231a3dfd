package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kewplan/kewplan/config"
	"github.com/kewplan/kewplan/jsonplan"
	"github.com/kewplan/kewplan/plandiff"
	"github.com/kewplan/kewplan/policyrules"
	"github.com/kewplan/kewplan/views"
)

// PolicyCmd groups the commands about an organisation's policy.
type PolicyCmd struct {
	Test PolicyTestCmd `cmd:"" help:"Run the policy's tests: every *.policytest.hcl file in DIR is a case that plans a configuration and says which rules must match."`
}

// PolicyTestCmd is `kewplan policy test [DIR]`.
type PolicyTestCmd struct {
	Dir string `arg:"" optional:"" default:"." help:"The directory holding the *.policytest.hcl cases (not recursive)."`
}

// Help shows a case and the exit statuses.
func (PolicyTestCmd) Help() string {
	return "Example case, DIR/opus-fan-out.policytest.hcl:\n\n" +
		"  configuration = \"../fixtures/opus-fan-out\"   # a configuration or a saved plan, relative to this file\n" +
		"  base          = \"../fixtures/base.plan\"      # optional: what change is computed against\n" +
		"  policy        = \"policy.hcl\"                 # optional; default: policy.hcl beside the case\n" +
		"  expect {\n    deny   = [\"opus-fan-out\"]\n    review = []\n    warn   = []\n  }\n\n" +
		"A level the expect block leaves out is not checked.\n" +
		"Exit status 0 when every case passes, 1 when any fails or cannot run."
}

// Run runs every case in order of file name and reports each.
func (c *PolicyTestCmd) Run(env *Env) error {
	view := views.NewPolicyTest(env.streams())
	entries, err := os.ReadDir(c.Dir)
	if err != nil {
		return fmt.Errorf("policy test: %w", err)
	}
	var cases []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), config.PolicyTestSuffix) {
			cases = append(cases, filepath.Join(c.Dir, e.Name()))
		}
	}
	if len(cases) == 0 {
		return fmt.Errorf("no %s files in %s: write one case per file (kewplan policy test --help shows one)", config.PolicyTestSuffix, c.Dir)
	}
	slices.Sort(cases)
	failed := 0
	for _, path := range cases {
		pc := views.PolicyCase{Name: strings.TrimSuffix(filepath.Base(path), config.PolicyTestSuffix), File: path}
		pc.Problems = runPolicyCase(env, view, path)
		if len(pc.Problems) > 0 {
			failed++
		}
		if err := view.Case(pc); err != nil {
			return err
		}
	}
	if err := view.Summary(c.Dir, len(cases), failed); err != nil {
		return err
	}
	if failed > 0 {
		return ExitCode(1)
	}
	return nil
}

// runPolicyCase plans one case's configuration (or reads its saved plan), judges it with the case's policy and
// base, and returns what differs from its expect block, or why it could not run.
func runPolicyCase(env *Env, view views.PolicyTest, path string) []string {
	tc, files, diags := config.LoadPolicyTestCase(path)
	if diags.HasErrors() {
		view.Diagnostics(diags, files)
		return []string{"the case does not load (see the diagnostics above)"}
	}
	pol, polFiles, diags := config.LoadPolicyFile(tc.PolicyPath)
	if diags.HasErrors() {
		view.Diagnostics(diags, polFiles)
		return []string{fmt.Sprintf("the policy %s does not load (see the diagnostics above)", tc.PolicyPath)}
	}
	doc, cfgPolicy, problem := policyCasePlan(env, view, tc.ConfigurationPath, tc.Configuration, tc.PolicyPath)
	if problem != "" {
		return []string{problem}
	}
	policies := []*config.Policy{cfgPolicy, pol}
	var change *plandiff.Diff
	if tc.BasePath != "" {
		base, _, problem := policyCasePlan(env, view, tc.BasePath, tc.Base, tc.PolicyPath)
		if problem != "" {
			return []string{"base: " + problem}
		}
		change = plandiff.Compare(tc.BasePath, base, tc.ConfigurationPath, doc)
	}
	res := policyrules.Evaluate(policyrules.Rules(policies...), policyrules.Input{Plan: doc, Change: change})
	var problems []string
	for _, level := range config.RuleLevels {
		want, checked := tc.Expect[level]
		if !checked {
			continue
		}
		got := res.Matched(level)
		for _, name := range want {
			if !slices.Contains(got, name) {
				problems = append(problems, fmt.Sprintf("%s: rule %q was expected to match and did not", level, name))
			}
		}
		for _, name := range got {
			if !slices.Contains(want, name) {
				problems = append(problems, fmt.Sprintf("%s: rule %q matched and was not expected", level, name)+failedNote(res, name))
			}
		}
	}
	return problems
}

// policyCasePlan is the plan document of a case's configuration or base: a saved plan (or plan --json output)
// as it is, or a configuration planned as plan --policy plans it; with the configuration's own policy block.
func policyCasePlan(env *Env, view views.PolicyTest, path, written, policyPath string) (*jsonplan.Document, *config.Policy, string) {
	if isSavedPlan(path) {
		d, err := readPlanArg(env, path, "case")
		if err != nil {
			return nil, nil, err.Error()
		}
		return d, nil, ""
	}
	if _, err := os.Stat(path); err != nil {
		return nil, nil, fmt.Sprintf("%s: %v", written, err)
	}
	pl, ok := planFromFlags(env, view, path, VarFlags{}, nil, policyPath)
	if !ok {
		return nil, nil, fmt.Sprintf("the configuration %s does not load (see the diagnostics above)", written)
	}
	return jsonplan.NewDocument(pl.plan, version, pl.files...), pl.cfg.Policy, ""
}

// failedNote says why a rule that could not be judged counts as deny.
func failedNote(res *policyrules.Result, name string) string {
	for _, f := range res.Findings {
		if f.Rule.Name == name && f.Failed {
			return " (its condition cannot be judged: " + f.Problem + ")"
		}
	}
	return ""
}
