package config

import (
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/kewplan/kewplan/internal/safefile"
)

// An organisation policy is checked against every plan (planner.CheckPolicy). It is static on purpose: its values
// are literals, never variables or functions, so that the repository under review cannot steer the policy that
// judges it through --var or a file it ships.

// policyBlockSchema is the content of a `policy` block.
var policyBlockSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "require_pinned_images"},
		{Name: "allowed_networks"},
		{Name: "allowed_image_prefixes"},
		{Name: "credentials"},
		{Name: "max_pids_limit"},
		{Name: "required_runtime"},
		{Name: "allowed_egress"},
		{Name: "require_brokered_credentials"},
		{Name: "refuse_unmaskable_credentials"},
		{Name: "allowed_repositories"},
		{Name: "allowed_branches"},
		{Name: "forbid_private_hosts"},
		{Name: "provider_fetch"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "approvals"}, {Type: "rule", LabelNames: []string{"name"}}},
}

// policyFileSchema is the top level of a file given with --policy: one policy block and nothing else.
var policyFileSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{{Type: "policy"}},
}

// MaxPolicyFileBytes bounds a --policy file; a policy is a few lines, so anything near this is a mistake.
const MaxPolicyFileBytes = 1 << 20

var (
	policyCredentialName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	policyRunnerName     = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]*$`)
)

// decodePolicyBlock decodes a `policy` block (in a configuration, or alone in a --policy file).
func decodePolicyBlock(block *hcl.Block) (*Policy, hcl.Diagnostics) {
	p := &Policy{DeclRange: block.DefRange}
	var diags hcl.Diagnostics
	if len(block.Labels) > 0 {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Unexpected policy block label",
			Detail:   "A policy block takes no label. Write `policy {` without a name.",
			Subject:  block.LabelRanges[0].Ptr(),
		})
	}
	content, moreDiags := bodyContent(block.Body, policyBlockSchema, "a policy block")
	diags = append(diags, moreDiags...)
	p.Approvals = decodeApprovalsBlocks(content.Blocks, &diags)
	p.Rules = decodePolicyRules(content.Blocks, &diags)

	if attr, ok := content.Attributes["require_pinned_images"]; ok {
		p.RequirePinnedImagesRange = attr.Range
		if v, ok := policyLiteral(attr, cty.Bool, &diags); ok {
			p.RequirePinnedImages = v.True()
		}
	}
	if attr, ok := content.Attributes["refuse_unmaskable_credentials"]; ok {
		p.RefuseUnmaskableCredentialsRange = attr.Range
		if v, ok := policyLiteral(attr, cty.Bool, &diags); ok {
			p.RefuseUnmaskableCredentials = v.True()
		}
	}
	if attr, ok := content.Attributes["forbid_private_hosts"]; ok {
		p.ForbidPrivateHostsRange = attr.Range
		if v, ok := policyLiteral(attr, cty.Bool, &diags); ok {
			p.ForbidPrivateHosts = v.True()
		}
	}
	if attr, ok := content.Attributes["require_brokered_credentials"]; ok {
		p.RequireBrokeredCredentialsRange = attr.Range
		if v, ok := policyLiteral(attr, cty.Bool, &diags); ok {
			p.RequireBrokeredCredentials = v.True()
		}
	}
	if attr, ok := content.Attributes["allowed_networks"]; ok {
		p.AllowedNetworksRange = attr.Range
		p.AllowedNetworks = decodePolicyStringList(attr, &diags, func(s string, r hcl.Range) *hcl.Diagnostic {
			if s == NetworkAllowlist || s == NetworkOpen {
				return nil
			}
			return &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid network in policy",
				Detail: fmt.Sprintf("The network mode %q is not one kewplan knows. allowed_networks lists sandbox "+
					"network modes: %q or %q.", s, NetworkAllowlist, NetworkOpen),
				Subject: r.Ptr(),
			}
		})
	}
	if attr, ok := content.Attributes["allowed_image_prefixes"]; ok {
		p.AllowedImagePrefixRange = attr.Range
		p.AllowedImagePrefixes = decodePolicyStringList(attr, &diags, func(s string, r hcl.Range) *hcl.Diagnostic {
			if strings.TrimSpace(s) != "" && s == strings.TrimSpace(s) {
				return nil
			}
			return &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid image prefix in policy",
				Detail: "An image prefix must be a non-empty string without surrounding spaces, such as " +
					"\"ghcr.io/acme/\". An empty prefix would allow every image.",
				Subject: r.Ptr(),
			}
		})
	}
	if attr, ok := content.Attributes["credentials"]; ok {
		p.CredentialsRange = attr.Range
		p.Credentials = decodePolicyCredentials(attr, &diags)
	}
	if attr, ok := content.Attributes["allowed_egress"]; ok {
		p.AllowedEgressRange = attr.Range
		var patterns []HostPattern
		decodePolicyStringList(attr, &diags, func(s string, r hcl.Range) *hcl.Diagnostic {
			hp, msg := ParseHostPattern(s)
			if msg != "" {
				return &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid egress pattern in policy",
					Detail:   fmt.Sprintf("The entry %q of allowed_egress cannot be used. %s", printable(s), msg),
					Subject:  r.Ptr(),
				}
			}
			hp.Range = r
			patterns = append(patterns, hp)
			return nil
		})
		if patterns != nil {
			p.AllowedEgress = SortHostPatterns(patterns)
		}
	}
	if attr, ok := content.Attributes["provider_fetch"]; ok {
		p.ProviderFetchRange = attr.Range
		p.ProviderFetch = decodePolicyProviderFetch(attr, &diags)
	}
	if attr, ok := content.Attributes["allowed_repositories"]; ok {
		p.AllowedRepositoriesRange = attr.Range
		p.AllowedRepositories = decodePolicyStringList(attr, &diags, func(s string, r hcl.Range) *hcl.Diagnostic {
			if msg := CheckRepositoryPattern(s); msg != "" {
				return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid repository pattern in policy",
					Detail: fmt.Sprintf("The entry %q of allowed_repositories cannot be used: %s", printable(s), msg), Subject: r.Ptr()}
			}
			return nil
		})
	}
	if attr, ok := content.Attributes["allowed_branches"]; ok {
		p.AllowedBranchesRange = attr.Range
		p.AllowedBranches = decodePolicyStringList(attr, &diags, func(s string, r hcl.Range) *hcl.Diagnostic {
			if msg := CheckBranchPattern(s); msg != "" {
				return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid branch pattern in policy",
					Detail: fmt.Sprintf("The entry %q of allowed_branches cannot be used: %s", printable(s), msg), Subject: r.Ptr()}
			}
			return nil
		})
	}
	if attr, ok := content.Attributes["max_pids_limit"]; ok {
		p.MaxPidsLimitRange = attr.Range
		if v, ok := policyLiteral(attr, cty.Number, &diags); ok {
			p.MaxPidsLimit = decodePolicyPidsLimit(v, attr.Expr.Range(), &diags)
		}
	}
	if attr, ok := content.Attributes["required_runtime"]; ok {
		p.RequiredRuntimeRange = attr.Range
		if v, ok := policyLiteral(attr, cty.String, &diags); ok {
			if msg := checkRuntimeName(v.AsString(), "Name the runtime every node must run on, such as \"runsc\" for gVisor, or remove required_runtime to allow any runtime."); msg != "" {
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid required_runtime",
					Detail:   "The required_runtime of the policy is not valid: " + msg,
					Subject:  attr.Expr.Range().Ptr(),
				})
			} else {
				p.RequiredRuntime = v.AsString()
			}
		}
	}
	return p, diags
}

// policyLiteral evaluates a policy attribute without any variables or functions and converts it to want.
func policyLiteral(attr *hcl.Attribute, want cty.Type, diags *hcl.Diagnostics) (cty.Value, bool) {
	return policyLiteralExpr(attr.Name, attr.Expr, want, diags)
}

func policyLiteralExpr(name string, expr hcl.Expression, want cty.Type, diags *hcl.Diagnostics) (cty.Value, bool) {
	if vars := expr.Variables(); len(vars) > 0 {
		*diags = append(*diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Policy values must be literals",
			Detail: fmt.Sprintf("The policy attribute %q refers to %s. A policy judges the configuration, so it "+
				"cannot depend on variables, locals or nodes of that configuration. Write the value literally.",
				name, traversalName(vars[0])),
			Subject: vars[0].SourceRange().Ptr(),
		})
		return cty.NilVal, false
	}
	if fns := functionCalls(expr); len(fns) > 0 {
		*diags = append(*diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Policy values must be literals",
			Detail: fmt.Sprintf("The policy attribute %q calls the function %s(). A policy is static; write "+
				"the value literally.", name, fns[0].Name),
			Subject: fns[0].Range().Ptr(),
		})
		return cty.NilVal, false
	}
	v, moreDiags := expr.Value(nil)
	if moreDiags.HasErrors() {
		*diags = append(*diags, moreDiags...)
		return cty.NilVal, false
	}
	if v.IsNull() {
		*diags = append(*diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid policy value",
			Detail: fmt.Sprintf("The policy attribute %q is null. Remove the attribute to leave that check "+
				"off, or give it a value.", name),
			Subject: expr.Range().Ptr(),
		})
		return cty.NilVal, false
	}
	converted, err := convertPolicyValue(v, want)
	if err != nil {
		*diags = append(*diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid policy value",
			Detail: fmt.Sprintf("The policy attribute %q must be %s, but this is %s.", name,
				policyTypeName(want), policyTypeName(v.Type())),
			Subject: expr.Range().Ptr(),
		})
		return cty.NilVal, false
	}
	return converted, true
}

// convertPolicyValue accepts exactly the type asked for: a policy is written by people who mean what they write,
// so "true" the string is not quietly a bool.
func convertPolicyValue(v cty.Value, want cty.Type) (cty.Value, error) {
	if v.Type().Equals(want) {
		return v, nil
	}
	return cty.NilVal, errors.New("type mismatch")
}

func policyTypeName(t cty.Type) string {
	switch {
	case t == cty.Bool:
		return "a bool (true or false)"
	case t == cty.Number:
		return "a number"
	case t == cty.String:
		return "a string"
	case t.IsTupleType() || t.IsListType():
		return "a list"
	case t.IsObjectType() || t.IsMapType():
		return "an object"
	default:
		return t.FriendlyName()
	}
}

// decodePolicyStringList decodes a list of strings, checking each element with check (which may be nil).
func decodePolicyStringList(attr *hcl.Attribute, diags *hcl.Diagnostics, check func(string, hcl.Range) *hcl.Diagnostic) []string {
	elems, ok := policyListElems(attr.Name, attr.Expr, diags)
	if !ok {
		return nil
	}
	if len(elems) == 0 {
		*diags = append(*diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Empty list in policy",
			Detail: fmt.Sprintf("The policy attribute %q is an empty list, which no node could satisfy. List at "+
				"least one value, or remove the attribute to leave that check off.", attr.Name),
			Subject: attr.Expr.Range().Ptr(),
		})
		return nil
	}
	out := make([]string, 0, len(elems))
	seen := map[string]bool{}
	for _, e := range elems {
		v, ok := policyLiteralExpr(attr.Name, e, cty.String, diags)
		if !ok {
			continue
		}
		s := v.AsString()
		if check != nil {
			if d := check(s, e.Range()); d != nil {
				*diags = append(*diags, d)
				continue
			}
		}
		if seen[s] {
			*diags = append(*diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Duplicate value in policy",
				Detail:   fmt.Sprintf("%q is listed twice in %q. Remove the repeated entry.", s, attr.Name),
				Subject:  e.Range().Ptr(),
			})
			continue
		}
		seen[s] = true
		out = append(out, s)
	}
	return out
}

// policyListElems returns the element expressions of a list written literally ([...]).
func policyListElems(name string, expr hcl.Expression, diags *hcl.Diagnostics) ([]hcl.Expression, bool) {
	elems, moreDiags := hcl.ExprList(expr)
	if moreDiags.HasErrors() {
		*diags = append(*diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid policy value",
			Detail: fmt.Sprintf("The policy attribute %q must be a list of strings written in brackets, such "+
				"as [\"allowlist\"].", name),
			Subject: expr.Range().Ptr(),
		})
		return nil, false
	}
	return elems, true
}

// decodePolicyProviderFetch decodes `provider_fetch = ["web_search"]`: the features a plan may opt in to. Unlike
// the other lists an empty one is meaningful (no feature), and every node without provider_fetch satisfies it.
func decodePolicyProviderFetch(attr *hcl.Attribute, diags *hcl.Diagnostics) []string {
	elems, ok := policyListElems(attr.Name, attr.Expr, diags)
	if !ok {
		return nil
	}
	if len(elems) == 0 {
		return []string{}
	}
	list := decodePolicyStringList(attr, diags, func(s string, r hcl.Range) *hcl.Diagnostic {
		if slices.Contains(ProviderFetchFeatures, s) {
			return nil
		}
		return &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Unknown provider-fetch feature in policy",
			Detail: fmt.Sprintf("The entry %q of provider_fetch is not a feature kewplan's broker knows.%s The policy's provider_fetch lists the features a node may opt in to, from %s.",
				printable(s), didYouMean(s, ProviderFetchFeatures), quotedList(ProviderFetchFeatures)),
			Subject: r.Ptr(),
		}
	})
	if list == nil {
		return []string{} // every entry was refused: allow none, and the errors stop the plan anyway
	}
	return list
}

// decodePolicyCredentials decodes `credentials = { NAME = ["runner", ...] }`.
func decodePolicyCredentials(attr *hcl.Attribute, diags *hcl.Diagnostics) map[string][]string {
	pairs, moreDiags := hcl.ExprMap(attr.Expr)
	if moreDiags.HasErrors() {
		*diags = append(*diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid policy value",
			Detail: "The policy attribute \"credentials\" must be an object from credential name to the list of " +
				"runners allowed to receive it, such as { ANTHROPIC_API_KEY = [\"claude-code\"] }.",
			Subject: attr.Expr.Range().Ptr(),
		})
		return nil
	}
	out := make(map[string][]string, len(pairs))
	for _, kv := range pairs {
		k, ok := policyLiteralExpr(attr.Name, kv.Key, cty.String, diags)
		if !ok {
			continue
		}
		cred := k.AsString()
		if !policyCredentialName.MatchString(cred) {
			*diags = append(*diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid credential name in policy",
				Detail: fmt.Sprintf("%q is not an environment variable name. The keys of credentials are the "+
					"names runners forward, such as ANTHROPIC_API_KEY: letters, digits and underscores, not "+
					"starting with a digit. Never write a value here.", cred),
				Subject: kv.Key.Range().Ptr(),
			})
			continue
		}
		if _, dup := out[cred]; dup {
			*diags = append(*diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Duplicate credential in policy",
				Detail:   fmt.Sprintf("The credential %s is listed twice in credentials. Merge the two lists.", cred),
				Subject:  kv.Key.Range().Ptr(),
			})
			continue
		}
		elems, ok := policyListElems(attr.Name, kv.Value, diags)
		if !ok {
			continue
		}
		runners := make([]string, 0, len(elems))
		seen := map[string]bool{}
		valid := true
		for _, e := range elems {
			v, ok := policyLiteralExpr(attr.Name, e, cty.String, diags)
			if !ok {
				valid = false
				continue
			}
			name := v.AsString()
			switch {
			case !policyRunnerName.MatchString(name):
				*diags = append(*diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Invalid runner name in policy",
					Detail: fmt.Sprintf("%q is not a runner name. Runner names start with a letter and hold "+
						"letters, digits, '_' and '-', such as \"claude-code\".", name),
					Subject: e.Range().Ptr(),
				})
				valid = false
			case seen[name]:
				*diags = append(*diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Duplicate value in policy",
					Detail:   fmt.Sprintf("The runner %q is listed twice for %s. Remove the repeated entry.", name, cred),
					Subject:  e.Range().Ptr(),
				})
			default:
				seen[name] = true
				runners = append(runners, name)
			}
		}
		if !valid {
			continue
		}
		// An empty list is meaningful: no runner may receive that credential.
		out[cred] = runners
	}
	return out
}

func decodePolicyPidsLimit(v cty.Value, r hcl.Range, diags *hcl.Diagnostics) int64 {
	bf := v.AsBigFloat()
	n, acc := bf.Int64()
	if !bf.IsInt() || acc != big.Exact || n < 1 {
		*diags = append(*diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid max_pids_limit",
			Detail: fmt.Sprintf("max_pids_limit must be a whole number of at least 1, but this is %s. It bounds "+
				"every node's --pids-limit (the sandbox default is 512).", bf.Text('g', -1)),
			Subject: r.Ptr(),
		})
		return 0
	}
	return n
}

func traversalName(t hcl.Traversal) string {
	var b strings.Builder
	for i, step := range t {
		switch s := step.(type) {
		case hcl.TraverseRoot:
			b.WriteString(s.Name)
		case hcl.TraverseAttr:
			b.WriteString("." + s.Name)
		default:
			if i == 0 {
				b.WriteString("a value")
			}
		}
	}
	return b.String()
}

// functionCalls finds function calls in a native-syntax expression (JSON expressions have none to find).
func functionCalls(expr hcl.Expression) []*hclsyntax.FunctionCallExpr {
	se, ok := expr.(hclsyntax.Expression)
	if !ok {
		return nil
	}
	var calls []*hclsyntax.FunctionCallExpr
	_ = hclsyntax.VisitAll(se, func(n hclsyntax.Node) hcl.Diagnostics {
		if c, ok := n.(*hclsyntax.FunctionCallExpr); ok {
			calls = append(calls, c)
		}
		return nil
	})
	return calls
}

// LoadPolicyFile reads a file holding one `policy` block (kewplan plan --policy FILE), so an organisation can keep
// its policy outside the repository under review. The returned map holds the file's source by the name used in
// diagnostic ranges, for snippets.
func LoadPolicyFile(path string) (*Policy, map[string][]byte, hcl.Diagnostics) {
	src, err := readPolicyFile(path)
	if err != nil {
		return nil, nil, hcl.Diagnostics{err}
	}
	files := map[string][]byte{path: src}
	p, diags := ParsePolicy(src, path)
	return p, files, diags
}

func readPolicyFile(path string) ([]byte, *hcl.Diagnostic) {
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Policy file not found",
			Detail: fmt.Sprintf("The policy file %s does not exist. Give --policy the path of an .hcl file "+
				"holding one policy block.", path),
		}
	case err != nil:
		return nil, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Cannot read policy file",
			Detail:   fmt.Sprintf("Reading the policy file %s failed: %v.", path, err),
		}
	case info.IsDir():
		return nil, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Policy file is a directory",
			Detail: fmt.Sprintf("%s is a directory. Give --policy the path of one .hcl file holding a policy "+
				"block.", path),
		}
	case info.Size() > MaxPolicyFileBytes:
		return nil, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Policy file too large",
			Detail: fmt.Sprintf("The policy file %s is %d bytes; a policy file may be at most %d bytes. A "+
				"policy is a few lines: check that the path names the right file.", path, info.Size(), MaxPolicyFileBytes),
		}
	}
	src, err := safefile.Read(path, MaxPolicyFileBytes)
	if err != nil {
		return nil, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Cannot read policy file",
			Detail: fmt.Sprintf("Reading the policy file %s failed: %s. Give --policy the path of a regular .hcl "+
				"file.", path, describeFSError(err)),
		}
	}
	return src, nil
}

// ParsePolicy decodes the source of a policy file named filename (used in ranges): exactly one policy block.
func ParsePolicy(src []byte, filename string) (*Policy, hcl.Diagnostics) {
	if !utf8.Valid(src) {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Policy file is not UTF-8",
			Detail: fmt.Sprintf("The policy file %s is not valid UTF-8 text. Save it as UTF-8; a policy file "+
				"is HCL source.", filename),
			Subject: &hcl.Range{Filename: filename, Start: hcl.InitialPos, End: hcl.InitialPos},
		}}
	}
	if d := CheckNesting(filename, src); d != nil {
		return nil, hcl.Diagnostics{d}
	}
	file, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, diags
	}
	content, moreDiags := bodyContent(file.Body, policyFileSchema, "the top level of a policy file")
	diags = append(diags, moreDiags...)
	var blocks []*hcl.Block
	for _, b := range content.Blocks {
		if b.Type == "policy" {
			blocks = append(blocks, b)
		}
	}
	if len(blocks) == 0 {
		if moreDiags.HasErrors() {
			return nil, diags
		}
		return nil, append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "No policy block",
			Detail: fmt.Sprintf("The policy file %s holds no policy block. Write one, for example:\n\n"+
				"policy {\n  require_pinned_images = true\n  allowed_networks      = [\"allowlist\"]\n}", filename),
			Subject: &hcl.Range{Filename: filename, Start: hcl.InitialPos, End: hcl.InitialPos},
		})
	}
	sort.SliceStable(blocks, func(i, j int) bool { return blocks[i].DefRange.Start.Byte < blocks[j].DefRange.Start.Byte })
	for _, b := range blocks[1:] {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Duplicate policy block",
			Detail: fmt.Sprintf("A policy block was already written at %s. A policy file holds exactly one "+
				"policy block: merge the two.", blocks[0].DefRange),
			Subject: b.DefRange.Ptr(),
		})
	}
	p, moreDiags := decodePolicyBlock(blocks[0])
	return p, append(diags, moreDiags...)
}
