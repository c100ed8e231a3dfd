package planfile

import (
	"errors"
	"fmt"

	"github.com/kewplan/kewplan/internal/termsafe"
	"github.com/kewplan/kewplan/planner"
)

// RulePolicyMismatch is the rule id of EnforcePolicy's refusal.
const RulePolicyMismatch = "policy-mismatch"

// ErrPolicyMismatch is wrapped by EnforcePolicy's error.
var ErrPolicyMismatch = errors.New("the saved plan was not made with the organisation policy apply enforces [" + RulePolicyMismatch + "]")

// EnforcePolicy makes the policy file path, whose bytes are src, the one the plan is checked against: apply's
// input (--policy), never the plan's. The plan must record a policy with the same SHA-256, so that what was
// reviewed was judged by exactly it; from then on the staleness check, the re-plan and PolicyLocation use path,
// whatever path the plan names. The error wraps ErrPolicyMismatch.
func (f *File) EnforcePolicy(path string, src []byte) error {
	sum := planner.SHA256Hex(src)
	switch s := f.Doc.Saved; {
	case s == nil || s.Policy == nil:
		return fmt.Errorf("%w: it records no policy, and apply enforces %s (sha256 %s). Run kewplan plan --policy %s --out PLANFILE and have that plan reviewed and approved",
			ErrPolicyMismatch, termsafe.String(path), sum, termsafe.String(path))
	case s.Policy.SHA256 != sum:
		return fmt.Errorf("%w: it was checked against a policy of sha256 %s (it names %s), and apply enforces %s, sha256 %s. Run kewplan plan --policy %s --out PLANFILE and have that plan reviewed and approved",
			ErrPolicyMismatch, termsafe.String(s.Policy.SHA256), termsafe.String(s.Policy.Path), termsafe.String(path), sum, termsafe.String(path))
	}
	f.policy = path
	return nil
}
