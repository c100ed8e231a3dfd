package config

import "github.com/hashicorp/hcl/v2"

// decodePolicyBlock decodes a `policy` block (in a configuration, or alone in a --policy file).
// STUB: the policy work replaces this body; the configuration decoder calls it for every `policy` block.
func decodePolicyBlock(block *hcl.Block) (*Policy, hcl.Diagnostics) {
	return &Policy{DeclRange: block.DefRange}, nil
}

// LoadPolicyFile reads a file holding one `policy` block (kewplan plan --policy FILE), so an organisation can keep
// its policy outside the repository under review.
// STUB: the policy work replaces this body.
func LoadPolicyFile(path string) (*Policy, map[string][]byte, hcl.Diagnostics) {
	return nil, nil, nil
}
