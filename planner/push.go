package planner

import (
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/kewplan/kewplan/config"
)

// Where a worker's work lands. A worker pushes its commits to one branch of its repository and may open a pull
// request; a reviewer pushes nothing. A worker may not push to a protected branch (the built-in names, the
// sandbox's protected_branches, the branch it was cloned from) unless its node says allow_protected_push; the
// broker checks again at apply against the remote's default branch, which only the remote knows.

// Rule ids of the write side.
const (
	// RulePushProtectedBranch: a worker would push to a protected branch. An error at plan and at apply.
	RulePushProtectedBranch = "push-protected-branch"
	// RuleProtectedPush: a worker pushes to a protected branch because its node allows it.
	RuleProtectedPush = "protected-push"
	// RulePolicyPush: a worker writes to a repository or branch the policy does not allow.
	RulePolicyPush = "policy-push"
)

func init() {
	RegisterRules(
		Rule{ID: RulePushProtectedBranch, Severity: SeverityError,
			Summary:     "Push to a protected branch",
			Description: "A worker's commits are an agent's work, unreviewed: they go to a branch of their own and reach a production branch through a pull request. A worker that pushes straight to main, master, trunk, develop, release/*, the branch it was cloned from, the remote's default branch or a branch the sandbox's protected_branches names would put them there without review (a fast-forward push succeeds).",
			Help:        "Push to a branch of the node's own (remove branch to get kew/<node>, or name another one) and add a pull_request { base = \"main\" } block, or set allow_protected_push = true on the node to push there knowingly."},
		Rule{ID: RuleProtectedPush, Severity: SeverityWarning,
			Summary:     "Worker pushes to a protected branch",
			Description: "The node sets allow_protected_push = true, so its agent's commits go straight onto a protected branch without review.",
			Help:        "Remove allow_protected_push and push to a branch of the node's own with a pull request, unless landing there unreviewed is what you want."},
		Rule{ID: RulePolicyPush, Severity: SeverityError,
			Summary:     "Push not allowed by the policy",
			Description: "The organisation policy bounds the repositories (allowed_repositories) and branches (allowed_branches) a worker may push to: where an agent can write is half of what it can do.",
			Help:        "Point the node at a repository and branch the policy allows, make it a reviewer (it pushes nothing), or have the policy extended."},
	)
	registerPlanCheck(checkProtectedPushes)
}

// ProtectedBranches returns the branch patterns a worker cloned at ref may not push to: the built-in names, the
// sandbox's protected_branches, and ref itself when it names a branch ("" is the remote's default branch, which
// only the remote knows: the broker asks it at apply).
func ProtectedBranches(sandbox []string, ref string) []string {
	out := append([]string{}, config.BuiltinProtectedBranches...)
	for _, p := range sandbox {
		if !contains(out, p) {
			out = append(out, p)
		}
	}
	if b := refBranch(ref); b != "" && !contains(out, b) {
		out = append(out, b)
	}
	return out
}

// ProtectedBranchPattern returns the first of patterns that branch matches, and whether one does.
func ProtectedBranchPattern(patterns []string, branch string) (string, bool) {
	for _, p := range patterns {
		if config.MatchBranch(p, branch) {
			return p, true
		}
	}
	return "", false
}

var commitID = regexp.MustCompile(`^[0-9a-f]{7,64}$`)

// refBranch returns the branch a clone ref names, or "" when it names a commit, a tag or the default branch.
func refBranch(ref string) string {
	switch {
	case ref == "", commitID.MatchString(ref), strings.HasPrefix(ref, "refs/tags/"):
		return ""
	case strings.HasPrefix(ref, "refs/heads/"):
		return strings.TrimPrefix(ref, "refs/heads/")
	case strings.HasPrefix(ref, "refs/"):
		return ""
	}
	return ref
}

// MaskURL returns a repository URL with any user name, password and query masked ("https://***@github.com/…"):
// a token written in a clone URL never reaches a plan view. An scp-like address keeps its user, which is a login
// name (git@), never a secret.
func MaskURL(repo string) string {
	u, err := url.Parse(repo)
	if err != nil || u.Scheme == "" || len(u.Scheme) < 2 || u.Opaque != "" {
		return repo
	}
	masked := false
	if u.User != nil {
		u.User = url.User("***")
		masked = true
	}
	if u.RawQuery != "" {
		u.RawQuery = "***"
		masked = true
	}
	if !masked {
		return repo
	}
	return strings.Replace(u.String(), "%2A%2A%2A", "***", 1)
}

// Pushes reports whether the node's agent's work is pushed: a worker's is, a reviewer's never.
func (np *NodePlan) Pushes() bool { return np.Role == config.RoleWorker }

// planPush decides the node's write-side settings: allow_protected_push, the branches it may not push to, and
// whether apply --resume starts it from its kept work.
func (b *builder) planPush(np *NodePlan, n *config.Node) {
	sb := b.cfg.Sandbox
	np.AllowProtectedPush = n.AllowProtectedPush
	np.ResumeFromSalvage = sb != nil && sb.ResumeFromSalvage
	if n.ResumeFromSalvage != nil {
		np.ResumeFromSalvage = *n.ResumeFromSalvage
	}
	var patterns []string
	if sb != nil {
		patterns = sb.ProtectedBranches
	}
	ref := np.Ref
	if contains(np.Unknown, "ref") {
		ref = ""
	}
	np.ProtectedBranches = ProtectedBranches(patterns, ref)
}

// checkProtectedPushes refuses each worker that would push to a protected branch, and warns about each one that
// may because its node says allow_protected_push; it also applies the policy's allowed_repositories and
// allowed_branches.
func checkProtectedPushes(cfg *config.Config, in Inputs, p *Plan) hcl.Diagnostics {
	var diags hcl.Diagnostics
	var sandbox []string
	if cfg.Sandbox != nil {
		sandbox = cfg.Sandbox.ProtectedBranches
	}
	for _, np := range p.Nodes {
		n := cfg.Nodes[np.Block]
		if n == nil {
			continue
		}
		if !np.Pushes() || np.Branch == "" || contains(np.Unknown, "branch") || contains(np.Unknown, "role") {
			continue
		}
		pat, hit := ProtectedBranchPattern(np.ProtectedBranches, np.Branch)
		if !hit {
			continue
		}
		subject := np.DeclRange
		if n.Branch != nil {
			subject = n.Branch.Range()
		}
		why := protectedWhy(pat, np.Ref, sandbox)
		if n.AllowProtectedPush {
			diags = append(diags, NewDiagnostic(RuleProtectedPush, rangePtr(n.AllowProtectedPushRange),
				fmt.Sprintf("%s pushes its agent's commits straight to the branch %q of %s, which is protected (%s).",
					capitalise(describeNode(np.Name)), np.Branch, config.RepositoryName(np.Repo), why)))
			continue
		}
		diags = append(diags, NewDiagnostic(RulePushProtectedBranch, rangePtr(subject),
			fmt.Sprintf("%s would push its agent's commits to the branch %q of %s, which is protected (%s).",
				capitalise(describeNode(np.Name)), np.Branch, config.RepositoryName(np.Repo), why)))
		np.Errors = true
		np.Container = nil
	}
	for _, pol := range []*config.Policy{cfg.Policy, in.Policy} {
		if pol != nil {
			diags = append(diags, checkPolicyPush(cfg, p, pol)...)
		}
	}
	return diags
}

// protectedWhy says which rule protects a branch matched by pat.
func protectedWhy(pat, ref string, sandbox []string) string {
	switch {
	case contains(config.BuiltinProtectedBranches, pat):
		return fmt.Sprintf("built in: %s", pat)
	case contains(sandbox, pat):
		return fmt.Sprintf("the sandbox's protected_branches: %s", pat)
	case pat == refBranch(ref):
		return "it is the branch the node is cloned from"
	}
	return pat
}

// checkPolicyPush refuses each worker whose repository or branch the policy's allowed_repositories or
// allowed_branches do not cover.
func checkPolicyPush(cfg *config.Config, p *Plan, pol *config.Policy) hcl.Diagnostics {
	if pol.AllowedRepositories == nil && pol.AllowedBranches == nil {
		return nil
	}
	type finding struct {
		what, detail string
		subject      hcl.Range
		nodes        []string
	}
	byKey := map[string]*finding{}
	var order []*finding
	add := func(key string, subject hcl.Range, node, detail string) {
		f := byKey[key]
		if f == nil {
			f = &finding{subject: subject, detail: detail}
			byKey[key] = f
			order = append(order, f)
		}
		f.nodes = append(f.nodes, node)
	}
	where := policyWhere(pol)
	for _, np := range p.Nodes {
		if !np.Pushes() || contains(np.Unknown, "role") {
			continue
		}
		n := nodeBlock(cfg, np)
		if pol.AllowedRepositories != nil && np.Repo != "" && !contains(np.Unknown, "repo") && !anyMatch(pol.AllowedRepositories, np.Repo, config.MatchRepository) {
			subject := np.DeclRange
			if n != nil && n.Repo != nil {
				subject = n.Repo.Range()
			}
			name := config.RepositoryName(np.Repo)
			add("repo\x00"+name+"\x00"+subject.String(), subject, np.Name,
				fmt.Sprintf("writes to the repository %s, and the policy%s allows pushes only to %s.", name, where, policyQuoteList(pol.AllowedRepositories)))
		}
		if pol.AllowedBranches != nil && np.Branch != "" && !contains(np.Unknown, "branch") && !anyMatch(pol.AllowedBranches, np.Branch, config.MatchBranch) {
			subject := np.DeclRange
			if n != nil && n.Branch != nil {
				subject = n.Branch.Range()
			}
			add("branch\x00"+np.Branch+"\x00"+subject.String(), subject, np.Name,
				fmt.Sprintf("pushes to the branch %q, and the policy%s allows pushes only to %s.", np.Branch, where, policyQuoteList(pol.AllowedBranches)))
		}
	}
	var diags hcl.Diagnostics
	for _, f := range order {
		sort.Strings(f.nodes)
		diags = append(diags, NewDiagnostic(RulePolicyPush, rangePtr(f.subject), policyCapitalise(countNodes(f.nodes))+" "+f.detail))
		for _, name := range f.nodes {
			if np := p.Node(name); np != nil {
				np.Errors = true
				np.Container = nil
			}
		}
	}
	return diags
}

func anyMatch(patterns []string, s string, match func(pat, s string) bool) bool {
	for _, p := range patterns {
		if match(p, s) {
			return true
		}
	}
	return false
}
