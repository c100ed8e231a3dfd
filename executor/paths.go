package executor

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/kewplan/kewplan/planner"
)

// nodePathName is the one file-name component apply derives a node's paths from: its checkout
// (checkouts/RUN/NAME), its logs (logs/RUN/NAME.stdout.log, .stderr.log) and its verdict copy (verdicts/RUN/NAME).
// It is the node's Slug ([a-z0-9_-], unique in the plan), never its address: an instance address such as
// fix["../x"] holds quotes, brackets, slashes and dots. The address stays what results, the ledger, hooks and
// re-plans use. A plan without a usable slug (one built by hand) gets a name hashed from its address, so no path
// ever leaves the state directory.
func nodePathName(np *planner.NodePlan) string {
	if safePathComponent(np.Slug) {
		return np.Slug
	}
	if np.Slug == "" && safePathComponent(np.Name) {
		return np.Name
	}
	sum := sha256.Sum256([]byte(np.Name))
	return "node-" + hex.EncodeToString(sum[:8])
}

// safePathComponent reports whether s is one plain file name: [A-Za-z0-9_.-], at most 200 bytes, not "." or "..".
func safePathComponent(s string) bool {
	if s == "" || s == "." || s == ".." || len(s) > 200 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c == '-' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
